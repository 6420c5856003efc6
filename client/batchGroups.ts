/** The groups of a batch as Temporal knows them: results of the finished ones, the rest by id and status. */
import type { Client } from '@temporalio/client';
import type { GroupResult } from '../shared/pipeline.js';

export interface BatchGroups {
  finished: GroupResult[];
  unfinished: { workflowId: string; status: string }[];
}

export async function listBatchGroups(client: Client, batchId: string): Promise<BatchGroups> {
  const groups: BatchGroups = { finished: [], unfinished: [] };
  for await (const wf of client.workflow.list({ query: `RolloutBatch="${batchId}" AND WorkflowType="rolloutGroup"` })) {
    if (wf.status.name === 'COMPLETED') groups.finished.push((await client.workflow.getHandle(wf.workflowId).result()) as GroupResult);
    else groups.unfinished.push({ workflowId: wf.workflowId, status: wf.status.name });
  }
  groups.finished.sort((a, b) => a.taskId.localeCompare(b.taskId));
  return groups;
}
