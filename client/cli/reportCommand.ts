/** `rollout report <batch> [--html FILE]`: stage timings, outcomes and rewards of a batch's finished groups. */
import { writeFileSync } from 'node:fs';
import { listBatchGroups } from '../batchGroups.js';
import { writeRolloutPages } from '../show/rolloutPages.js';
import { openStoreFromFlags } from './cliSettings.js';
import { buildReport, reportText } from '../report/batchReport.js';
import { reportHtml } from '../report/reportHtml.js';
import { batchServerFromFlags } from '../batchServer/batchServerFromFlags.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';

export const reportUsage = `rollout report <batch-id> [--html FILE] [--store fs|fs:DIR|postgres://...] [--trajectories DIR] [--data-dir DIR] [--address HOST:PORT]
  Per-stage timing p50/p95, outcomes by class and type, reward distribution per task,
  what was masked by class and type (flagged past failurePolicy.maxMaskedFraction);
  --html writes a self-contained page with plots and every rollout linked to its own
  page (as rollout show --html), written to the folder FILE-rollouts/ beside it.`;

export async function reportCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    command: 'report',
    usage: reportUsage,
    options: {
      html: { type: 'string' },
      trajectories: { type: 'string' },
      store: { type: 'string' },
      'data-dir': { type: 'string' },
      address: { type: 'string' },
    },
    allowPositionals: true,
  });
  const [batchId] = positionals;
  if (!batchId || positionals.length > 1) throw new UsageError(`name one batch id\n${reportUsage}`);
  if (!/^[A-Za-z0-9._-]+$/.test(batchId)) throw new UsageError(`batch id ${JSON.stringify(batchId)} has characters batch ids never have`);
  const server = await batchServerFromFlags(values, batchId);
  const temporal = server.client;
  try {
    const { finished: groups, unfinished } = await listBatchGroups(temporal, batchId);
    const open = unfinished.length;
    if (groups.length === 0) {
      process.stdout.write(`no finished groups of batch ${batchId}${open ? ` (${open} not finished)` : ''}\n`);
      return 1;
    }
    const report = buildReport(batchId, groups);
    process.stdout.write(`${reportText(report)}\n`);
    if (open) process.stdout.write(`(${open} groups not finished yet are not included)\n`);
    if (values.html) {
      const store = await openStoreFromFlags(values);
      try {
        const pages = await writeRolloutPages(values.html, groups, store, { lines: 20 });
        writeFileSync(values.html, reportHtml(report, { rolloutHref: pages.href }));
        process.stdout.write(`html: ${values.html}\nrollout pages: ${pages.dir} (${pages.written})\n`);
      } finally {
        await store.close();
      }
    }
    return 0;
  } finally {
    await server.close();
  }
}
