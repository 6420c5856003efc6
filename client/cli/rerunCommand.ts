/**
 * `rollout rerun <workflowId>`: a new rollout with the same experiment record
 * (task version, policy and seed, limits), compared side by side with the
 * original. Exit 0 when the experiment record is the same, 1 when a pinned
 * field differs. Needs workers running on the original's task queues.
 */
import { RerunError, rerunRollout } from '../rerunRollout.js';
import { batchOfWorkflowId, batchServerFromFlags } from '../batchServer/batchServerFromFlags.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';

export const rerunUsage = `rollout rerun <rollout-workflow-id> [--batch-id ID] [--data-dir DIR] [--address HOST:PORT]
  Starts a new rollout with the same experiment record (task version, policy, sampling seed,
  limits) under a new batch id, waits for it and prints both side by side.`;

export async function rerunCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    command: 'rerun',
    usage: rerunUsage,
    options: { 'batch-id': { type: 'string' }, address: { type: 'string' }, 'data-dir': { type: 'string' } },
    allowPositionals: true,
  });
  const [workflowId] = positionals;
  if (!workflowId || positionals.length > 1) throw new UsageError(`name one rollout workflow id (rollout/<batch>/<task>/<index>)\n${rerunUsage}`);
  const server = await batchServerFromFlags(values, batchOfWorkflowId(workflowId), { mutates: 'a rerun' });
  try {
    const { client } = server;
    process.stderr.write(`rerunning ${workflowId} …\n`);
    const r = await rerunRollout({ client, workflowId, ...(values['batch-id'] ? { batchId: values['batch-id'] } : {}) });
    const rows: [string, string, string][] = [
      ['workflow', r.originalWorkflowId, r.rerunWorkflowId],
      ['outcome', `${r.original.outcomeClass}/${r.original.outcomeType}`, `${r.rerun.outcomeClass}/${r.rerun.outcomeType}`],
      ['reward', String(r.original.reward ?? 'none'), String(r.rerun.reward ?? 'none')],
      ['turns', String(r.original.turns), String(r.rerun.turns)],
      ['attempts', String(r.original.attempts), String(r.rerun.attempts)],
      ...r.fields.map((f): [string, string, string] => [`${f.field}${f.same ? '' : f.pinned ? ' (DIFFERS)' : ' (differs)'}`, f.original.slice(0, 60), f.rerun.slice(0, 60)]),
    ];
    const w0 = Math.max(...rows.map((row) => row[0].length));
    const w1 = Math.max(...rows.map((row) => row[1].length));
    process.stdout.write(`${'field'.padEnd(w0)}  ${'original'.padEnd(w1)}  rerun\n`);
    for (const [a, b, c] of rows) process.stdout.write(`${a.padEnd(w0)}  ${b.padEnd(w1)}  ${c}\n`);
    process.stdout.write(r.sameExperiment ? 'same experiment record' : 'the experiment record differs in a pinned field (see DIFFERS above)');
    process.stdout.write(`; reward ${r.original.reward === r.rerun.reward ? 'reproduced' : 'differs'}\n`);
    return r.sameExperiment ? 0 : 1;
  } catch (err) {
    if (err instanceof RerunError) throw new UsageError(err.message);
    throw err;
  } finally {
    await server.close();
  }
}
