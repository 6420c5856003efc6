/**
 * The reaper: removes every sandbox whose owning workflow is closed (or gone),
 * or whose lease expired, through the same provider interface. Workflow
 * `finally` blocks do not run on terminate or run timeouts, and a worker can
 * die mid-attempt; the durable record of which sandboxes exist plus Temporal's
 * record of which workflows are open is what makes cleanup guaranteed anyway.
 */
import type { SandboxProvider, SandboxRecord } from '../../shared/sandbox.js';

export type OwnerStatus = 'open' | 'closed' | 'missing';

export type ReapReason = 'owner-closed' | 'owner-missing' | 'lease-expired' | 'never-started';

export interface ReapReport {
  examined: number;
  dryRun: boolean;
  reaped: { id: string; reason: ReapReason; owner: SandboxRecord['owner']; processesKilled: number }[];
  kept: { id: string; owner: SandboxRecord['owner'] }[];
  errors: { id: string; error: string }[];
}

export interface ReapOptions {
  dryRun?: boolean;
  now?: number;
  /** A sandbox whose record has no handle yet is only reaped once it is this old (provisioning may be under way). */
  provisioningGraceMs?: number;
}

export async function reapSandboxes(
  provider: SandboxProvider,
  ownerStatus: (workflowId: string, runId: string) => Promise<OwnerStatus>,
  options: ReapOptions = {},
): Promise<ReapReport> {
  const now = options.now ?? Date.now();
  const grace = options.provisioningGraceMs ?? 5 * 60 * 1000;
  const report: ReapReport = { examined: 0, dryRun: options.dryRun ?? false, reaped: [], kept: [], errors: [] };
  for (const record of await provider.list()) {
    report.examined++;
    let reason: ReapReason | undefined;
    try {
      if (Date.parse(record.leaseExpiresAt) <= now) reason = 'lease-expired';
      else if (record.handle === null && now - Date.parse(record.createdAt) > grace) reason = 'never-started';
      else {
        const status = await ownerStatus(record.owner.workflowId, record.owner.runId);
        if (status === 'closed') reason = 'owner-closed';
        else if (status === 'missing') reason = 'owner-missing';
      }
      if (!reason) {
        report.kept.push({ id: record.id, owner: record.owner });
        continue;
      }
      const processesKilled = report.dryRun ? 0 : (await provider.teardown(record.id)).processesKilled;
      report.reaped.push({ id: record.id, reason, owner: record.owner, processesKilled });
    } catch (err) {
      report.errors.push({ id: record.id, error: err instanceof Error ? err.message : String(err) });
    }
  }
  return report;
}
