/**
 * `rollout replay-history <workflowId>`: fetches a workflow's history from
 * Temporal and replays it against this checkout's workflow code. Exit 0 when
 * it replays; 1 with the nondeterminism error when a code change would break
 * that run.
 */
import { Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { WORKFLOWS_PATH } from '../../workers/pipelineWorkers.js';
import { batchOfWorkflowId, batchServerFromFlags } from '../batchServer/batchServerFromFlags.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';

export const replayHistoryUsage = `rollout replay-history <workflow-id> [--run-id ID] [--data-dir DIR] [--address HOST:PORT]
  Replays a workflow's recorded history against the current workflow code.`;

export async function replayHistoryCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    command: 'replay-history',
    usage: replayHistoryUsage,
    options: { 'run-id': { type: 'string' }, address: { type: 'string' }, 'data-dir': { type: 'string' } },
    allowPositionals: true,
  });
  const [workflowId] = positionals;
  if (!workflowId || positionals.length > 1) throw new UsageError(`name one workflow id\n${replayHistoryUsage}`);
  const server = await batchServerFromFlags(values, batchOfWorkflowId(workflowId));
  const temporal = server.client;
  try {
    const history = await temporal.workflow.getHandle(workflowId, values['run-id']).fetchHistory();
    try {
      await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, workflowId);
    } catch (err) {
      if (err instanceof DeterminismViolationError) {
        process.stdout.write(`NONDETERMINISTIC ${workflowId}: ${err.message}\n`);
        return 1;
      }
      throw err;
    }
    process.stdout.write(`replays: ${workflowId} (${history.events?.length ?? 0} events) against ${WORKFLOWS_PATH}\n`);
    return 0;
  } finally {
    await server.close();
  }
}
