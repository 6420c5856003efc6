/**
 * Reads where each group of a batch stands from Temporal: running groups by
 * their progress query, finished ones by their result (fetched once, then kept).
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { GroupResult } from '../../shared/pipeline.js';
import { groupProgressQuery } from '../../workflows/definitions.js';
import { stateFromClosedWorkflow, stateFromProgress, stateFromResult, taskIdOf, type GroupState } from './groupState.js';

async function progressOf(handle: WorkflowHandle) {
  return handle.query(groupProgressQuery).catch(() => undefined);
}

/** The groups a `rollout run` submitted; `results` holds those whose result it has already received. */
export async function submittedGroupStates(
  groups: readonly { workflowId: string; taskId: string; handle: WorkflowHandle }[],
  groupSize: number,
  results: ReadonlyMap<string, GroupResult>,
): Promise<GroupState[]> {
  return Promise.all(
    groups.map(async (g) => {
      const result = results.get(g.workflowId);
      return result ? stateFromResult(result) : stateFromProgress(g.taskId, groupSize, await progressOf(g.handle));
    }),
  );
}

/** Every group of a batch started anywhere (listed by its RolloutBatch search attribute), sorted by task. */
export function batchGroupStates(client: Client, batchId: string): () => Promise<GroupState[]> {
  const results = new Map<string, GroupResult>();
  return async () => {
    const states: Promise<GroupState>[] = [];
    for await (const wf of client.workflow.list({ query: `RolloutBatch="${batchId}" AND WorkflowType="rolloutGroup"` })) {
      const handle = client.workflow.getHandle(wf.workflowId);
      const taskId = taskIdOf(wf.workflowId);
      states.push(
        (async () => {
          const known = results.get(wf.workflowId);
          if (known) return stateFromResult(known);
          if (wf.status.name === 'COMPLETED') {
            const result = (await handle.result()) as GroupResult;
            results.set(wf.workflowId, result);
            return stateFromResult(result);
          }
          const progress = await progressOf(handle);
          if (wf.status.name === 'RUNNING') return stateFromProgress(taskId, progress?.total ?? 0, progress);
          return stateFromClosedWorkflow(taskId, progress?.total ?? 0, wf.status.name);
        })(),
      );
    }
    return (await Promise.all(states)).sort((a, b) => a.taskId.localeCompare(b.taskId));
  };
}
