/**
 * `rollout show <rollout-workflow-id> [--html FILE]`: one rollout turn by
 * turn, from Temporal (result, or live progress) and the trajectory store.
 */
import { writeFileSync } from 'node:fs';
import { batchOfWorkflowId, batchServerFromFlags } from '../batchServer/batchServerFromFlags.js';
import { readRolloutState, ShowError } from '../show/readRolloutState.js';
import { rolloutHtml } from '../show/rolloutHtml.js';
import { rolloutText } from '../show/rolloutText.js';
import { buildRolloutView } from '../show/rolloutView.js';
import { openStoreFromFlags } from './cliSettings.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';

export const showUsage = `rollout show <rollout-workflow-id> [--html FILE] [--lines N] [--store fs|fs:DIR|postgres://...] [--trajectories DIR] [--data-dir DIR] [--address HOST:PORT]
  One rollout turn by turn: the policy's messages, each tool call with its output
  (the last N lines of each stream, default 20, with sizes), the verifier's output,
  reward, outcome, and every attempt with its failure. A running rollout shows what
  it has so far. --html writes the same as a self-contained page.`;

export async function showCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    command: 'show',
    usage: showUsage,
    options: { html: { type: 'string' }, lines: { type: 'string' }, trajectories: { type: 'string' }, store: { type: 'string' }, 'data-dir': { type: 'string' }, address: { type: 'string' } },
    allowPositionals: true,
  });
  const [workflowId] = positionals;
  if (!workflowId || positionals.length > 1) throw new UsageError(`name one rollout workflow id (rollout/<batch>/<task>/<index>)\n${showUsage}`);
  const lines = values.lines === undefined ? 20 : Number(values.lines);
  if (!Number.isInteger(lines) || lines < 1) throw new UsageError(`--lines ${JSON.stringify(values.lines)}: give a whole number of lines, 1 or more`);
  const store = await openStoreFromFlags(values);
  const server = await batchServerFromFlags(values, batchOfWorkflowId(workflowId)).catch(async (err: unknown) => {
    await store.close();
    throw err;
  });
  try {
    const view = await buildRolloutView(await readRolloutState(server.client, workflowId, server.where), store, { lines });
    process.stdout.write(rolloutText(view));
    if (values.html) {
      writeFileSync(values.html, rolloutHtml(view));
      process.stdout.write(`html: ${values.html}\n`);
    }
    return 0;
  } catch (err) {
    if (err instanceof ShowError) throw new UsageError(err.message);
    throw err;
  } finally {
    await server.close();
    await store.close();
  }
}
