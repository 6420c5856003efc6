/**
 * `rollout gc [--dry-run]`: reaps this machine's sandboxes whose owning
 * workflow is closed or gone, or whose lease expired (what the janitor
 * schedule does every minute), and prints what it removed.
 */
import { openTemporalClient, temporalSettings } from '../../workers/temporalConnection.js';
import { reapSandboxes } from '../../activities/reaper/reapSandboxes.js';
import { temporalOwnerStatus } from '../../activities/reaper/temporalOwnerStatus.js';
import { LocalSandboxProvider } from '../../activities/sandbox/local/localSandboxProvider.js';
import { parseCommandLine } from './commandLine.js';

export const gcUsage = `rollout gc [--dry-run] [--address HOST:PORT]
  Removes local sandboxes whose workflow is closed or gone, or whose lease expired.`;

export async function gcCommand(argv: string[]): Promise<number> {
  const { values } = parseCommandLine(argv, { command: 'gc', usage: gcUsage, options: { 'dry-run': { type: 'boolean', default: false }, address: { type: 'string' } } });
  const { client: temporal, connection } = await openTemporalClient(temporalSettings(values.address));
  try {
    const report = await reapSandboxes(new LocalSandboxProvider(), temporalOwnerStatus(temporal), { dryRun: values['dry-run'] });
    const verb = report.dryRun ? 'would remove' : 'removed';
    for (const r of report.reaped) process.stdout.write(`${verb} ${r.id} (${r.reason}; owner ${r.owner.workflowId} attempt ${r.owner.attempt})\n`);
    for (const e of report.errors) process.stdout.write(`error ${e.id}: ${e.error}\n`);
    process.stdout.write(`${report.examined} sandboxes examined, ${report.reaped.length} ${verb}, ${report.kept.length} kept (owner still running)\n`);
    return report.errors.length === 0 ? 0 : 1;
  } finally {
    await connection.close();
  }
}
