/** reapSandboxes: one janitor pass over this host's sandboxes (sandboxes/reaper/). */
import { withHeartbeats } from '../heartbeats.js';
import { reapSandboxes, type ReapReport } from '../../sandboxes/reaper/reapSandboxes.js';
import type { ActivityContext } from './activityContext.js';

export async function reapPass({ deps, countSandboxes }: ActivityContext, options: { dryRun: boolean }): Promise<ReapReport> {
  // Heartbeats: the janitor's pass on a worker that dies is noticed within the heartbeat timeout.
  const report = await withHeartbeats(() => reapSandboxes(deps.provider, deps.ownerStatus, { dryRun: options.dryRun }));
  await countSandboxes();
  if (report.reaped.length > 0 || report.errors.length > 0 || report.strays.length > 0)
    deps.logger.info({ reaped: report.reaped, errors: report.errors, strays: report.strays, dryRun: report.dryRun }, 'reaper pass');
  return report;
}
