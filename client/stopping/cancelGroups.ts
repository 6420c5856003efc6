/**
 * Cancels a batch's unfinished groups and waits (bounded) until each of their
 * rollouts has closed: a rollout's teardown runs in its nonCancellable
 * `finally`, so a closed rollout has removed its sandbox. A group that
 * finished before the cancel reached it is returned with its result, never
 * dropped.
 */
import { WorkflowFailedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { rolloutWorkflowId } from '../../shared/names.js';
import type { GroupResult } from '../../shared/pipeline.js';

export interface GroupToCancel {
  taskId: string;
  taskDir: string;
  workflowId: string;
  groupSize: number;
}

export interface CancelledGroup extends GroupToCancel {
  /** Rollouts that had not closed when the wait ended (their sandboxes are left to the reaper). */
  stillOpen: string[];
}

export interface CancelReport {
  cancelled: CancelledGroup[];
  /** Groups that had finished after all: their results. */
  finished: GroupResult[];
}

type Outcome<T> = { value: T } | { error: unknown } | 'timeout';

/** How `p` settles, or 'timeout' at the deadline. */
async function within<T>(p: Promise<T>, deadline: number): Promise<Outcome<T>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), Math.max(0, deadline - Date.now()));
    timer.unref();
  });
  try {
    return await Promise.race([p.then((value) => ({ value }), (error: unknown) => ({ error })), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function isClosed(client: Client, workflowId: string): Promise<boolean> {
  try {
    return (await client.workflow.getHandle(workflowId).describe()).status.name !== 'RUNNING';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return true;
    throw err;
  }
}

export async function cancelGroups(client: Client, batchId: string, groups: GroupToCancel[], options: { waitMs: number }): Promise<CancelReport> {
  const deadline = Date.now() + options.waitMs;
  const report: CancelReport = { cancelled: [], finished: [] };
  await Promise.all(
    groups.map(async (group) => {
      const handle = client.workflow.getHandle(group.workflowId);
      await handle.cancel().catch((err: unknown) => {
        // Already closed (finished or cancelled before): its result, if any, is read below.
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      });
      const rollouts = Array.from({ length: group.groupSize }, (_, i) => rolloutWorkflowId(batchId, group.taskId, i));
      await Promise.all(rollouts.map((id) => within(client.workflow.getHandle(id).result(), deadline)));
      const outcome = await within(handle.result() as Promise<GroupResult>, deadline);
      if (typeof outcome === 'object' && 'value' in outcome) {
        report.finished.push(outcome.value);
        return;
      }
      if (typeof outcome === 'object' && !(outcome.error instanceof WorkflowFailedError || outcome.error instanceof WorkflowNotFoundError)) throw outcome.error;
      const open = await Promise.all(rollouts.map(async (id) => ((await isClosed(client, id)) ? undefined : id)));
      report.cancelled.push({ ...group, stillOpen: open.filter((id): id is string => id !== undefined) });
    }),
  );
  report.cancelled.sort((a, b) => a.taskId.localeCompare(b.taskId));
  return report;
}
