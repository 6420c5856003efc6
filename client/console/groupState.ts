/** Where one group of a batch stands, from its live progress query or its final result. */
import type { GroupResult } from '../../shared/pipeline.js';
import type { GroupProgress } from '../../workflows/definitions.js';

export interface GroupState {
  taskId: string;
  /** `queued` (no progress yet), `running`, or the finished group's status (complete, insufficient, failed, task_invalid, ...), or a closed workflow's status (cancelled, terminated, ...). */
  status: string;
  groupSize: number;
  finished: number;
  /** Per rollout: its reward once finished (null: finished without a valid reward), undefined while running. Index order once the group finished; while it runs, rewards so far first. */
  rewards: (number | null | undefined)[];
  /** True once the group will change no more. */
  closed: boolean;
}

export function taskIdOf(workflowId: string): string {
  return workflowId.slice(workflowId.lastIndexOf('/') + 1);
}

export function stateFromResult(result: GroupResult): GroupState {
  return {
    taskId: result.taskId,
    status: result.status,
    groupSize: result.groupSize,
    finished: result.groupSize,
    rewards: result.rollouts.length ? result.rollouts.map((r) => (r.valid ? r.reward : null)) : Array.from({ length: result.groupSize }, () => null),
    closed: true,
  };
}

export function stateFromProgress(taskId: string, groupSize: number, progress: GroupProgress | undefined): GroupState {
  if (!progress) return { taskId, status: 'queued', groupSize, finished: 0, rewards: Array.from({ length: groupSize }, () => undefined), closed: false };
  // The query's JSON turns "not finished yet" (undefined) into null, the same as "finished without a
  // valid reward", so the rollouts are told apart by count: rewards so far, then failed, then running.
  const valid = progress.rewards.filter((r): r is number => typeof r === 'number');
  const failed = Math.max(0, progress.finished - valid.length);
  const rewards = [...valid, ...Array.from({ length: failed }, () => null), ...Array.from({ length: Math.max(0, progress.total - valid.length - failed) }, () => undefined)];
  return { taskId, status: 'running', groupSize: progress.total, finished: progress.finished, rewards, closed: false };
}

/** A group whose workflow closed without a result (cancelled, terminated, timed out, failed). */
export function stateFromClosedWorkflow(taskId: string, groupSize: number, workflowStatus: string): GroupState {
  return { taskId, status: workflowStatus.toLowerCase(), groupSize, finished: 0, rewards: Array.from({ length: groupSize }, () => undefined), closed: true };
}
