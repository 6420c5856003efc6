import type { OutcomeClass, RolloutResult } from '../shared/pipeline.js';

/** A finished rollout as the store keeps it: its result (outcome, reward, experiment record) and where it belongs. */
export interface RolloutRecord {
  batchId: string;
  taskId: string;
  taskVersion: string;
  result: RolloutResult;
}

export interface RolloutQuery {
  batchId?: string;
  taskId?: string;
  outcomeClass?: OutcomeClass;
}

/**
 * Where conversations, tool outputs and token data live: outside workflow
 * history, which carries only references (claim check). Keys are
 * `<ref>/<name>` with ref = batch/task/rollout and names per attempt and turn;
 * writes are idempotent (a retried activity rewrites the same key). Finished
 * rollouts (outcome and experiment record) are kept too, queryable by batch,
 * task and outcome class.
 */
export interface TrajectoryStore {
  /** Writes (or rewrites) one JSON document. */
  put(ref: string, name: string, value: unknown): Promise<void>;
  get<T>(ref: string, name: string): Promise<T | undefined>;
  /** Names under `ref` that start with `prefix`, sorted. */
  list(ref: string, prefix?: string): Promise<string[]>;
  /** Where a human finds the data, e.g. a directory path. */
  locate(ref: string): string;
  /** Records (or re-records) a finished rollout, keyed by its workflow id. */
  putRollout(record: RolloutRecord): Promise<void>;
  /** Finished rollouts matching every given field, ordered by batch, task and rollout index. */
  queryRollouts(query: RolloutQuery): Promise<RolloutRecord[]>;
  /** Releases connections; the store is not used afterwards. */
  close(): Promise<void>;
}

/** The order queryRollouts returns: batch, task, rollout index. */
export function compareRolloutRecords(a: RolloutRecord, b: RolloutRecord): number {
  return a.batchId.localeCompare(b.batchId) || a.taskId.localeCompare(b.taskId) || a.result.index - b.result.index;
}

export { trajectoryRefOf as trajectoryRef } from '../shared/names.js';

export function attemptPrefix(attempt: number): string {
  return `attempt-${String(attempt).padStart(2, '0')}/`;
}

export function turnName(attempt: number, turn: number, part: string): string {
  return `${attemptPrefix(attempt)}turn-${String(turn).padStart(4, '0')}.${part}.json`;
}
