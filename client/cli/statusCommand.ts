/** `rollout status <batch>`: every group of a batch, running or finished, from Temporal itself. */
import type { Client } from '@temporalio/client';
import { groupProgressQuery } from '../../workflows/definitions.js';
import { listBatchGroups } from '../batchGroups.js';
import { summaryTable } from '../report/summaryTable.js';
import { batchServerFromFlags } from '../batchServer/batchServerFromFlags.js';
import { addressOf, serverWait } from '../outage/serverWait.js';
import { batchGroupStates } from '../console/batchStates.js';
import { progressDisplay } from '../console/progressDisplay.js';
import { watchProgress } from '../console/watchProgress.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';
import { rolloutWaits } from '../status/rolloutWaits.js';
import { inferenceStatus } from '../status/inferenceStatus.js';

/** Shows the batch's live progress until every group has finished; false when it has no groups. */
async function watchBatch(client: Client, batchId: string): Promise<boolean> {
  const poll = batchGroupStates(client, batchId);
  if ((await poll()).length === 0) return false;
  let allClosed: () => void = () => undefined;
  const closed = new Promise<void>((resolve) => (allClosed = resolve));
  const watch = watchProgress(
    progressDisplay({ batchId, stream: process.stderr }),
    async () => {
      const groups = await poll();
      if (groups.every((g) => g.closed)) allClosed();
      return groups;
    },
    process.stderr.isTTY ? 1000 : 2000,
  );
  await closed;
  await watch.stop();
  return true;
}

export const statusUsage = `rollout status <batch-id> [--watch] [--data-dir DIR] [--address HOST:PORT]
  Lists the batch's groups: progress of running ones, the table of finished ones
  with the fraction masked per group and for the batch (flagged past the guard).
  --watch   live progress (as rollout run shows it) until every group has finished, then the table`;

export async function statusCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    command: 'status',
    usage: statusUsage,
    options: { address: { type: 'string' }, 'data-dir': { type: 'string' }, watch: { type: 'boolean', default: false } },
    allowPositionals: true,
  });
  const [batchId] = positionals;
  if (!batchId || positionals.length > 1) throw new UsageError(`name one batch id\n${statusUsage}`);
  if (!/^[A-Za-z0-9._-]+$/.test(batchId)) throw new UsageError(`batch id ${JSON.stringify(batchId)} has characters batch ids never have`);
  // A server that is restarting is waited for, as during a run (README: Stopping and outages).
  const server = await batchServerFromFlags(values, batchId, { waitForServerMs: 5 * 60_000 });
  const { client } = server;
  const wait = serverWait(addressOf(client));
  try {
    if (values.watch && !(await watchBatch(client, batchId))) {
      process.stdout.write(`no groups of batch ${batchId} on ${server.where}\n`);
      return 1;
    }
    const { finished, unfinished } = await wait.retry(`the groups of batch ${batchId}`, () => listBatchGroups(client, batchId), { maxWaitMs: 5 * 60_000 });
    const groups = finished.length + unfinished.length;
    const running: string[] = [];
    for (const wf of unfinished) {
      if (wf.status === 'RUNNING') {
        const p = await client.workflow
          .getHandle(wf.workflowId)
          .query(groupProgressQuery)
          .catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
        // A query nobody answers: no worker runs its workflow tasks now, or its history shard is unavailable.
        running.push(`${wf.workflowId}: running, ${p instanceof Error ? `its progress did not answer (${p.message})` : `${p.finished}/${p.total} rollouts finished`}`);
      } else running.push(`${wf.workflowId}: ${wf.status.toLowerCase()}`);
    }
    if (groups === 0) {
      process.stdout.write(`no groups of batch ${batchId} on ${server.where}\n`);
      return 1;
    }
    for (const line of running) process.stdout.write(`${line}\n`);
    const firstRunning = unfinished.find((wf) => wf.status === 'RUNNING');
    if (firstRunning) {
      // How many rollouts are in flight and how loaded the inference server is now.
      const line = await inferenceStatus(client, batchId, firstRunning.workflowId).catch(() => undefined);
      if (line) process.stdout.write(`${line}\n`);
    }
    if (running.length) {
      // What is stuck and on what (a dead host's queue, a silent worker, a shard that does not answer).
      const waits = await rolloutWaits(client, batchId).catch(() => []);
      if (waits.length) process.stdout.write(`waiting:\n${waits.map((w) => `  ${w}`).join('\n')}\n`);
    }
    if (finished.length) process.stdout.write(`${summaryTable(finished)}\n`);
    return 0;
  } finally {
    await server.close();
  }
}
