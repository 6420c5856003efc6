/**
 * `rollout cancel <workflowId> --reason R`: cancels one rollout through its
 * cancelRollout update; the rest of its group goes on. The rollout tears its
 * sandbox down and ends as cancelled/operator with no reward.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { cancelRolloutUpdate } from '../../workflows/definitions.js';
import { batchOfWorkflowId, batchServerFromFlags } from '../batchServer/batchServerFromFlags.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';
import { cancelBatchCommand } from './cancelBatch.js';

export const cancelUsage = `rollout cancel <rollout-workflow-id> --reason TEXT [--data-dir DIR] [--address HOST:PORT]
  Cancels one rollout (its sandbox is torn down; it ends as cancelled/operator, outside the
  group baseline); the other rollouts of its group continue.
rollout cancel --batch ID [--data-dir DIR] [--address HOST:PORT]
  Cancels every running group of the batch; each rollout tears its sandbox down.`;

export async function cancelCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    command: 'cancel',
    usage: cancelUsage,
    options: { reason: { type: 'string' }, address: { type: 'string' }, 'data-dir': { type: 'string' }, batch: { type: 'string' } },
    allowPositionals: true,
  });
  if (values.batch !== undefined) {
    if (positionals.length > 0) throw new UsageError(`name a rollout or --batch, not both\n${cancelUsage}`);
    return cancelBatchCommand(values.batch, values);
  }
  const [workflowId] = positionals;
  if (!workflowId || positionals.length > 1) throw new UsageError(`name one rollout workflow id (rollout/<batch>/<task>/<index>)\n${cancelUsage}`);
  if (!values.reason?.trim()) throw new UsageError(`--reason is required: it is kept in the rollout's attempt history\n${cancelUsage}`);
  const server = await batchServerFromFlags(values, batchOfWorkflowId(workflowId), { mutates: 'cancelling' });
  const temporal = server.client;
  try {
    const handle = temporal.workflow.getHandle(workflowId);
    let response;
    try {
      response = await handle.executeUpdate(cancelRolloutUpdate, { args: [{ reason: values.reason }] });
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw new UsageError(`${workflowId}: no such workflow (or it has already closed)`);
      throw err;
    }
    if (!response.accepted) {
      process.stdout.write(`${workflowId} had already finished (${response.stage}); nothing cancelled\n`);
      return 1;
    }
    process.stdout.write(`${workflowId}: cancel accepted during ${response.stage} of attempt ${response.attempt + 1}; its sandbox is being torn down\n`);
    return 0;
  } finally {
    await server.close();
  }
}
