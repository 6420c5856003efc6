/** `rollout status <batch>`: every group of a batch, running or finished, from Temporal itself. */
import { parseArgs } from 'node:util';
import { groupProgressQuery } from '../../workflows/definitions.js';
import { listBatchGroups } from '../batchGroups.js';
import { summaryTable } from '../report/summaryTable.js';
import { temporalSettings } from '../../workers/temporalConnection.js';
import { openClientThroughOutage } from '../outage/openClient.js';
import { UsageError } from './usageError.js';

export const statusUsage = `rollout status <batch-id> [--address HOST:PORT]
  Lists the batch's groups: progress of running ones, the table of finished ones.`;

export async function statusCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, options: { address: { type: 'string' } }, allowPositionals: true, strict: true });
  const [batchId] = positionals;
  if (!batchId || positionals.length > 1) throw new UsageError(`name one batch id\n${statusUsage}`);
  if (!/^[A-Za-z0-9._-]+$/.test(batchId)) throw new UsageError(`batch id ${JSON.stringify(batchId)} has characters batch ids never have`);
  const { client, connection, wait } = await openClientThroughOutage(temporalSettings(values.address));
  try {
    const { finished, unfinished } = await wait.retry(`the groups of batch ${batchId}`, () => listBatchGroups(client, batchId), { maxWaitMs: 5 * 60_000 });
    const groups = finished.length + unfinished.length;
    const running: string[] = [];
    for (const wf of unfinished) {
      if (wf.status === 'RUNNING') {
        const p = await client.workflow.getHandle(wf.workflowId).query(groupProgressQuery).catch(() => undefined);
        running.push(`${wf.workflowId}: running, ${p ? `${p.finished}/${p.total} rollouts finished` : 'no progress yet'}`);
      } else running.push(`${wf.workflowId}: ${wf.status.toLowerCase()}`);
    }
    if (groups === 0) {
      process.stdout.write(`no groups of batch ${batchId} on ${temporalSettings(values.address).address}\n`);
      return 1;
    }
    for (const line of running) process.stdout.write(`${line}\n`);
    if (finished.length) process.stdout.write(`${summaryTable(finished)}\n`);
    return 0;
  } finally {
    await connection.close();
  }
}
