/**
 * What Temporal knows of one rollout: its result when it finished, its live
 * progress (stage, turn, the attempts ended so far) while it runs, why it
 * closed when it closed without a result, and its GRPO advantage once its
 * group finished. An id Temporal does not know is an error that names it and
 * the rollouts of its batch that do exist.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { GroupResult, RolloutResult } from '../../shared/pipeline.js';
import { trajectoryRefOf } from '../../shared/names.js';
import { rolloutProgressQuery, type RolloutProgress } from '../../workflows/definitions.js';

export class ShowError extends Error {
  override readonly name = 'ShowError';
}

export interface RolloutState {
  workflowId: string;
  /** Temporal's status, lower case: running, completed, failed, terminated, cancelled, timed_out, ... */
  status: string;
  batchId: string;
  taskId: string;
  index: number;
  trajectoryRef: string;
  startTime: Date | undefined;
  closeTime: Date | undefined;
  result?: RolloutResult;
  /** While running; undefined when no worker answered the query. */
  progress?: RolloutProgress;
  /** Why a closed rollout has no result (it failed, was terminated, timed out). */
  closeReason?: string;
  /** From the finished group (a rollout's own result has none). */
  advantage?: number | null;
}

const ROLLOUT_ID = /^rollout\/([A-Za-z0-9._-]+)\/([^/]+)\/(\d+)$/;

/** Batch, task and index of `rollout/<batch>/<task>/<index>`; a clear error for anything else. */
export function parseRolloutId(workflowId: string): { batchId: string; taskId: string; index: number } {
  const m = ROLLOUT_ID.exec(workflowId);
  if (!m && /^rollout\/[A-Za-z0-9._-]+\/[^/]+$/.test(workflowId)) throw new ShowError(`${workflowId} names a group (rollout/<batch>/<task>); add the rollout's index, e.g. ${workflowId}/0`);
  if (!m)
    throw new ShowError(
      `${JSON.stringify(workflowId)} is not a rollout workflow id; they look like rollout/<batch>/<task>/<index>, e.g. rollout/b1/fix-median/0 (\`rollout status <batch>\` lists a batch's tasks)`,
    );
  return { batchId: m[1]!, taskId: m[2]!, index: Number(m[3]) };
}

async function existingRollouts(client: Client, batchId: string, limit: number): Promise<string[]> {
  const ids: string[] = [];
  try {
    for await (const wf of client.workflow.list({ query: `RolloutBatch="${batchId}" AND WorkflowType="rollout"`, pageSize: limit })) {
      ids.push(wf.workflowId);
      if (ids.length >= limit) break;
    }
  } catch {
    // The hint is a courtesy; the error itself stands without it.
  }
  return ids.sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
}

async function notFound(client: Client, workflowId: string, batchId: string, address: string): Promise<ShowError> {
  const known = await existingRollouts(client, batchId, 8);
  const hint = known.length
    ? `rollouts of batch ${batchId} there include: ${known.join(', ')}`
    : `Temporal has no rollouts of batch ${batchId} at all`;
  return new ShowError(`no rollout ${workflowId} on ${address}; ${hint}. \`rollout status ${batchId}\` lists the batch's tasks and group sizes (ids are rollout/<batch>/<task>/<index>, index from 0)`);
}

function reasonOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.message}${cause}`;
}

export async function readRolloutState(client: Client, workflowId: string, address: string): Promise<RolloutState> {
  const { batchId, taskId, index } = parseRolloutId(workflowId);
  const handle = client.workflow.getHandle(workflowId);
  let description;
  try {
    description = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw await notFound(client, workflowId, batchId, address);
    throw err;
  }
  if (description.type !== 'rollout') throw new ShowError(`${workflowId} is a ${description.type} workflow, not a rollout`);
  const state: RolloutState = {
    workflowId,
    status: description.status.name.toLowerCase(),
    batchId,
    taskId,
    index,
    trajectoryRef: trajectoryRefOf(batchId, taskId, index),
    startTime: description.startTime,
    closeTime: description.closeTime,
  };
  if (description.status.name === 'RUNNING') {
    state.progress = await handle.query(rolloutProgressQuery).catch(() => undefined);
    // An attempt running on its sandbox's host (group.attemptOn 'host') knows its own turn and last action.
    const attemptId = state.progress?.attemptWorkflowId;
    if (state.progress && attemptId) {
      const live = await client.workflow.getHandle(attemptId).query(rolloutProgressQuery).catch(() => undefined);
      if (live) state.progress = { ...state.progress, stage: live.stage === 'done' ? state.progress.stage : live.stage, turn: live.turn, lastAction: live.lastAction };
    }
  } else if (description.status.name === 'COMPLETED') {
    state.result = (await handle.result()) as RolloutResult;
    state.trajectoryRef = state.result.trajectoryRef;
  } else {
    state.closeReason = await handle.result().then(
      () => 'closed without a result',
      (err: unknown) => reasonOf(err),
    );
  }
  const parent = description.parentExecution;
  if (state.result && parent?.workflowId) {
    const group = client.workflow.getHandle(parent.workflowId, parent.runId ?? undefined);
    const groupStatus = await group.describe().then((d) => d.status.name, () => undefined);
    if (groupStatus === 'COMPLETED') {
      const groupResult = (await group.result()) as GroupResult;
      state.advantage = groupResult.rollouts.find((r) => r.index === index)?.advantage ?? null;
    }
  }
  return state;
}
