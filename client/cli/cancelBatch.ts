/** `rollout cancel --batch ID`: cancels every running group of a batch and waits until their rollouts have closed. */
import { cancelGroups } from '../stopping/cancelGroups.js';
import { batchServerFromFlags } from '../batchServer/batchServerFromFlags.js';
import { UsageError } from './usageError.js';

export async function cancelBatchCommand(batchId: string, flags: { address?: string | undefined; 'data-dir'?: string | undefined }): Promise<number> {
  if (!/^[A-Za-z0-9._-]+$/.test(batchId)) throw new UsageError(`batch id ${JSON.stringify(batchId)} has characters batch ids never have`);
  const server = await batchServerFromFlags(flags, batchId, { mutates: 'cancelling' });
  const { client } = server;
  try {
    const groups = [];
    for await (const wf of client.workflow.list({ query: `RolloutBatch="${batchId}" AND WorkflowType="rolloutGroup" AND ExecutionStatus="Running"` })) {
      const taskId = wf.workflowId.slice(`rollout/${batchId}/`.length);
      let groupSize = 0;
      for await (const r of client.workflow.list({ query: `RolloutBatch="${batchId}" AND WorkflowType="rollout" AND RolloutTaskId="${taskId}"` })) {
        groupSize = Math.max(groupSize, Number(r.workflowId.slice(r.workflowId.lastIndexOf('/') + 1)) + 1);
      }
      groups.push({ taskId, taskDir: taskId, workflowId: wf.workflowId, groupSize });
    }
    if (groups.length === 0) {
      process.stdout.write(`no running group of batch ${batchId} on ${server.where}; nothing cancelled\n`);
      return 1;
    }
    const report = await cancelGroups(client, batchId, groups, { waitMs: 60_000 });
    for (const g of report.cancelled)
      process.stdout.write(
        `${g.workflowId}: cancelled${g.stillOpen.length ? `; still closing: ${g.stillOpen.join(', ')}` : ', every rollout closed (sandboxes torn down)'}\n`,
      );
    for (const g of report.finished) process.stdout.write(`${g.workflowId}: had finished (${g.status}); nothing cancelled\n`);
    return 0;
  } finally {
    await server.close();
  }
}
