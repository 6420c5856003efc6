/**
 * Where conversations, tool outputs and token data live: outside workflow
 * history, which carries only references (claim check). Keys are
 * `<ref>/<name>` with ref = batch/task/rollout and names per attempt and turn;
 * writes are idempotent (a retried activity rewrites the same key).
 */
export interface TrajectoryStore {
  /** Writes (or rewrites) one JSON document. */
  put(ref: string, name: string, value: unknown): Promise<void>;
  get<T>(ref: string, name: string): Promise<T | undefined>;
  /** Names under `ref` that start with `prefix`, sorted. */
  list(ref: string, prefix?: string): Promise<string[]>;
  /** Where a human finds the data, e.g. a directory path. */
  locate(ref: string): string;
}

export { trajectoryRefOf as trajectoryRef } from '../../shared/names.js';

export function attemptPrefix(attempt: number): string {
  return `attempt-${String(attempt).padStart(2, '0')}/`;
}

export function turnName(attempt: number, turn: number, part: string): string {
  return `${attemptPrefix(attempt)}turn-${String(turn).padStart(4, '0')}.${part}.json`;
}
