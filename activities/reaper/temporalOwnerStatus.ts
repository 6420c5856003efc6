/** Asks Temporal whether the workflow run that owns a sandbox is still open. */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { OwnerStatus } from '../../sandboxes/reaper/reapSandboxes.js';

export function temporalOwnerStatus(client: Client): (workflowId: string, runId: string) => Promise<OwnerStatus> {
  return async (workflowId, runId) => {
    try {
      const description = await client.workflow.getHandle(workflowId, runId || undefined).describe();
      return description.status.name === 'RUNNING' ? 'open' : 'closed';
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return 'missing';
      throw err;
    }
  };
}
