/**
 * `rollout gc [--dry-run] [--offline]`: reaps this machine's sandboxes whose
 * owning workflow is closed or gone, or whose lease expired (what the janitor
 * schedule does every minute), and prints what it removed. Without a reachable
 * Temporal server it says so (the address and the fix); `--offline` decides
 * from the sandbox registry alone: a sandbox whose holding worker process is
 * gone, or whose lease expired, goes; one a live worker holds never does.
 */
import { openTemporalClient, temporalSettings } from '../../workers/temporalConnection.js';
import { reapSandboxes, type ReapReport } from '../../sandboxes/reaper/reapSandboxes.js';
import { temporalOwnerStatus } from '../../activities/reaper/temporalOwnerStatus.js';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';

export const gcUsage = `rollout gc [--dry-run] [--offline] [--address HOST:PORT]
  Removes local sandboxes whose workflow is closed or gone, or whose lease expired.
  --offline   without a Temporal server: removes sandboxes whose worker process is gone or whose
              lease expired (from the sandbox registry); never one a live worker holds
  --dry-run   prints what it would remove, removes nothing`;

function print(report: ReapReport, offline: boolean): number {
  const verb = report.dryRun ? 'would remove' : 'removed';
  for (const r of report.reaped) process.stdout.write(`${verb} ${r.id} (${r.reason}; owner ${r.owner.workflowId} attempt ${r.owner.attempt})\n`);
  for (const k of report.kept) process.stdout.write(`kept ${k.id} (${k.why}; owner ${k.owner.workflowId})\n`);
  for (const s of report.strays) process.stdout.write(`released ${s} (left by a sandbox removed without a teardown)\n`);
  for (const e of report.errors) process.stdout.write(`error ${e.id}: ${e.error}\n`);
  process.stdout.write(`${report.examined} sandboxes examined${offline ? ' offline' : ''}, ${report.reaped.length} ${verb}, ${report.kept.length} kept\n`);
  return report.errors.length === 0 ? 0 : 1;
}

export async function gcCommand(argv: string[]): Promise<number> {
  const { values } = parseCommandLine(argv, {
    command: 'gc',
    usage: gcUsage,
    options: { 'dry-run': { type: 'boolean', default: false }, offline: { type: 'boolean', default: false }, address: { type: 'string' } },
  });
  const provider = new LocalSandboxProvider();
  const dryRun = values['dry-run'];
  if (values.offline) return print(await reapSandboxes(provider, null, { dryRun }), true);
  const settings = temporalSettings(values.address);
  let temporal;
  try {
    temporal = await openTemporalClient(settings, { timeoutMs: 5_000 });
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new UsageError(
      `cannot reach the Temporal server at ${settings.address} (${reason}).\n` +
        `Fix: start it (rollout server, or rollout run --embedded), or point --address / TEMPORAL_ADDRESS at the running one;\n` +
        `or run rollout gc --offline${dryRun ? ' --dry-run' : ''} to reap, without a server, the sandboxes whose worker process is gone or whose lease expired.`,
    );
  }
  try {
    return print(await reapSandboxes(provider, temporalOwnerStatus(temporal.client), { dryRun }), false);
  } finally {
    await temporal.close();
  }
}
