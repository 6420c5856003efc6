/**
 * `rollout branch <rollout-id> --at-turn K -n N`: N new rollouts that share the rollout's turns
 * 0..K-1 (restored into their own sandboxes by replay, the same token ids) and go on from turn K,
 * each with its own seed, as one group of a new batch (client/branch/branchRollout.ts). Waits for
 * them and prints each branch. Needs workers running on the original's task queues.
 */
import { openTrajectoryStore } from '../../stores/openTrajectoryStore.js';
import { BranchError, branchRollout } from '../branch/branchRollout.js';
import { batchOfWorkflowId, batchServerFromFlags } from '../batchServer/batchServerFromFlags.js';
import { dataDir } from './cliSettings.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';

export const branchUsage = `rollout branch <rollout-workflow-id> --at-turn K [-n N] [--batch-id ID] [--json] [--store fs|fs:DIR|postgres://...] [--data-dir DIR] [--address HOST:PORT]
  Starts N rollouts (default 2) that share the rollout's turns 0..K-1 (replayed into their own
  sandboxes and checked, the same answers and token ids) and sample from turn K on, each with its
  own seed; one group of a new batch (its advantages are over the siblings; rollout export gives
  each sample parent_rollout_id, branch_turn and prefix_length). Waits for them and prints each
  (--json: the group's result as one JSON line).`;

function whole(name: string, value: string | undefined, fallback?: number): number {
  if (value === undefined) {
    if (fallback === undefined) throw new UsageError(`--${name} is required\n${branchUsage}`);
    return fallback;
  }
  const n = Number(value);
  if (!Number.isInteger(n)) throw new UsageError(`--${name} must be a whole number, got ${JSON.stringify(value)}`);
  return n;
}

export async function branchCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    command: 'branch',
    usage: branchUsage,
    options: {
      'at-turn': { type: 'string' },
      n: { type: 'string', short: 'n' },
      json: { type: 'boolean', default: false },
      'batch-id': { type: 'string' },
      store: { type: 'string' },
      'data-dir': { type: 'string' },
      address: { type: 'string' },
    },
    allowPositionals: true,
  });
  const [workflowId] = positionals;
  if (!workflowId || positionals.length > 1) throw new UsageError(`name one rollout workflow id (rollout/<batch>/<task>/<index>)\n${branchUsage}`);
  const atTurn = whole('at-turn', values['at-turn']);
  const n = whole('n', values.n, 2);
  const store = await openTrajectoryStore(values.store ?? process.env.ROLLOUT_STORE, dataDir(values['data-dir']));
  const server = await batchServerFromFlags(values, batchOfWorkflowId(workflowId), { mutates: 'a branch' }).catch(async (err: unknown) => {
    await store.close();
    throw err;
  });
  try {
    const branches = await branchRollout(server.client, store, { rolloutId: workflowId, atTurn, n, ...(values['batch-id'] ? { batchId: values['batch-id'] } : {}) }, server.where);
    process.stderr.write(`${n} branch${n === 1 ? '' : 'es'} of ${workflowId} at turn ${atTurn} (attempt ${branches.attempt + 1}'s turns 0-${atTurn - 1} shared): batch ${branches.batch.batchId} …\n`);
    for await (const group of branches.batch.results()) {
      if (values.json) {
        process.stdout.write(`${JSON.stringify(group)}\n`);
        continue;
      }
      for (const r of group.rollouts) {
        const shared = r.branch ? (r.branch.sharedTurns > 0 ? `shares turns 0-${r.branch.sharedTurns - 1}` : 'shares no turn (its replay diverged)') : '';
        process.stdout.write(
          `${r.workflowId}  ${r.outcomeClass}/${r.outcomeType}  reward ${r.reward ?? 'none'}  advantage ${r.advantage === null ? 'none' : r.advantage.toFixed(3)}  ${r.turns} turns  ${shared}\n`,
        );
      }
      process.stdout.write(`group ${group.status}: mean reward ${group.meanReward ?? 'none'} over ${group.rollouts.filter((r) => r.valid).length} valid branch(es)\n`);
    }
    return 0;
  } catch (err) {
    if (err instanceof BranchError) throw new UsageError(err.message);
    throw err;
  } finally {
    await server.close();
    await store.close();
  }
}
