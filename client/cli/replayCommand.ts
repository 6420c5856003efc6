/**
 * `rollout replay <workflowId>`: re-runs a finished rollout's recorded actions
 * in a fresh sandbox without the model, re-verifies, and prints original and
 * replayed side by side. Exit 0 when the reward reproduces, 1 when it does not.
 */
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { openTrajectoryStore } from '../../stores/openTrajectoryStore.js';
import { ReplayError, replayRollout } from '../replayRollout.js';
import { dataDir } from './cliSettings.js';
import { batchOfWorkflowId, batchServerFromFlags } from '../batchServer/batchServerFromFlags.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';

export const replayUsage = `rollout replay <rollout-workflow-id> [--store fs|fs:DIR|postgres://...] [--trajectories DIR] [--data-dir DIR] [--address HOST:PORT]
  Re-executes the rollout's recorded tool calls in a fresh sandbox without the model,
  re-verifies, and says whether the reward reproduces.`;

export async function replayCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    command: 'replay',
    usage: replayUsage,
    options: { trajectories: { type: 'string' }, store: { type: 'string' }, 'data-dir': { type: 'string' }, address: { type: 'string' } },
    allowPositionals: true,
  });
  const [workflowId] = positionals;
  if (!workflowId || positionals.length > 1) throw new UsageError(`name one rollout workflow id (rollout/<batch>/<task>/<index>)\n${replayUsage}`);
  const store = await openTrajectoryStore(values.trajectories !== undefined ? `fs:${values.trajectories}` : (values.store ?? process.env.ROLLOUT_STORE), dataDir(values['data-dir']));
  const server = await batchServerFromFlags(values, batchOfWorkflowId(workflowId)).catch(async (err: unknown) => {
    await store.close();
    throw err;
  });
  const temporal = server.client;
  try {
    const replay = await replayRollout({ client: temporal, store, provider: new LocalSandboxProvider(), workflowId });
    process.stdout.write(`${workflowId} attempt ${replay.attempt + 1}: ${replay.actions.length} recorded actions re-executed without the model\n`);
    process.stdout.write('turn  original exit  replayed exit  action\n');
    for (const a of replay.actions) process.stdout.write(`${String(a.turn).padEnd(4)}  ${String(a.originalExitCode ?? '-').padEnd(13)}  ${String(a.replayedExitCode ?? '-').padEnd(13)}  ${a.call}\n`);
    process.stdout.write(
      `reward: original ${replay.originalReward ?? 'none'}, replayed ${replay.replayedReward} → ${replay.reproduced ? 'reproduced (the outcome is the model’s)' : 'NOT reproduced (environment non-determinism or infra)'}\n`,
    );
    if (replay.divergent.length) process.stdout.write(`${replay.divergent.length} actions exited differently than recorded\n`);
    return replay.reproduced ? 0 : 1;
  } catch (err) {
    if (err instanceof ReplayError) throw new UsageError(err.message);
    throw err;
  } finally {
    await server.close();
    await store.close();
  }
}
