/**
 * What a worker does on this host before it takes work: reap the sandboxes an
 * interrupted run left (owner workflow closed or unknown to this server and
 * its holder gone, lease expired), so a run stopped by a second Ctrl-C, a
 * SIGKILL or a crash does not leave its sandboxes until the first janitor
 * pass. A sandbox whose rollout is still open is kept: a restarted worker
 * re-attaches to it.
 */
import type { Logger } from 'pino';
import { reapSandboxes, type OwnerStatus, type ReapReport } from '../sandboxes/reaper/reapSandboxes.js';
import type { SandboxProvider } from '../shared/sandbox.js';

export async function reapAtStart(provider: SandboxProvider, ownerStatus: (workflowId: string, runId: string) => Promise<OwnerStatus>, logger: Logger): Promise<ReapReport | undefined> {
  try {
    const report = await reapSandboxes(provider, ownerStatus);
    if (report.reaped.length > 0 || report.errors.length > 0 || report.strays.length > 0) {
      logger.info({ reaped: report.reaped, strays: report.strays, errors: report.errors, kept: report.kept.length }, 'reaped sandboxes an earlier run left on this host');
    }
    return report;
  } catch (err) {
    // The janitor schedule tries again every minute; a failed pass must not keep the worker from starting.
    logger.warn({ error: err instanceof Error ? err.message : String(err) }, 'could not reap sandboxes at start; the janitor will');
    return undefined;
  }
}
