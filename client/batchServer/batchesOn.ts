/** Which batches a Temporal server holds, through the RolloutBatch search attribute the groups carry. */
import type { Client } from '@temporalio/client';
import { ROLLOUT_BATCH } from '../../shared/searchAttributes.js';

/** Whether any workflow of the batch (group or rollout) is on the server. */
export async function hasBatch(client: Client, batchId: string): Promise<boolean> {
  for await (const _ of client.workflow.list({ query: `RolloutBatch="${batchId}"`, pageSize: 1 })) return true;
  return false;
}

/** The batches of the newest groups on the server (distinct, newest first), reading at most `scan` groups. */
export async function batchesOn(client: Client, scan = 2_000): Promise<string[]> {
  const seen = new Set<string>();
  let read = 0;
  for await (const wf of client.workflow.list({ query: 'WorkflowType="rolloutGroup"', pageSize: 500 })) {
    const batch = wf.typedSearchAttributes.get(ROLLOUT_BATCH);
    if (batch !== undefined) seen.add(batch);
    if (++read >= scan) break;
  }
  return [...seen];
}
