/**
 * Async RL from the trainer's side: tell a batch's running groups which policy
 * version the endpoint serves now. Each group's advancePolicyVersion update
 * refuses a version lower than its current one (the error names both).
 */
import type { Client } from '@temporalio/client';
import { advancePolicyVersionUpdate, type AdvancePolicyVersionResponse } from '../workflows/definitions.js';

export interface AdvancedGroup extends AdvancePolicyVersionResponse {
  workflowId: string;
}

/** Advances every running group of the batch (or the given group ids) to `version`. */
export async function advancePolicyVersion(client: Client, batchId: string, version: number, workflowIds?: string[]): Promise<AdvancedGroup[]> {
  const ids = workflowIds ?? [];
  if (!workflowIds) {
    for await (const wf of client.workflow.list({ query: `RolloutBatch="${batchId}" AND WorkflowType="rolloutGroup" AND ExecutionStatus="Running"` })) ids.push(wf.workflowId);
  }
  const out: AdvancedGroup[] = [];
  for (const workflowId of ids) {
    const handle = client.workflow.getHandle(workflowId);
    try {
      out.push({ workflowId, ...(await handle.executeUpdate(advancePolicyVersionUpdate, { args: [{ version }] })) });
    } catch (err) {
      // A group that finished since it was listed has nothing left to tell; a refused version (or a named group) is an error.
      if (!workflowIds && (await handle.describe().catch(() => undefined))?.status.name !== 'RUNNING') continue;
      throw err;
    }
  }
  return out;
}
