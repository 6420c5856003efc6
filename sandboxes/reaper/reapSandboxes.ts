/**
 * The reaper: removes every sandbox whose owning workflow is closed (or gone),
 * or whose lease expired, through the same provider interface. Workflow
 * `finally` blocks do not run on terminate or run timeouts, and a worker can
 * die mid-attempt; the durable record of which sandboxes exist plus Temporal's
 * record of which workflows are open is what makes cleanup guaranteed anyway.
 *
 * Without a Temporal server (`rollout gc --offline`) the owner's state is
 * unknown; the record's holder (the worker process that holds the sandbox)
 * decides instead: a sandbox whose holder is gone, or whose lease expired and
 * whose holder is not alive, is reaped; one a live worker holds never is.
 *
 * A sandbox a provider's pool holds ready (SANDBOX_POOL_LABEL) has no owning
 * workflow: it is kept exactly while its holder process lives, online or not.
 */
import { SANDBOX_POOL_LABEL, type SandboxProvider, type SandboxRecord } from '../../shared/sandbox.js';

export type OwnerStatus = 'open' | 'closed' | 'missing';

export type ReapReason = 'owner-closed' | 'owner-missing' | 'lease-expired' | 'never-started' | 'holder-gone';

export interface ReapReport {
  examined: number;
  dryRun: boolean;
  reaped: { id: string; reason: ReapReason; owner: SandboxRecord['owner']; processesKilled: number }[];
  kept: { id: string; owner: SandboxRecord['owner']; why: string }[];
  errors: { id: string; error: string }[];
  /** What sandboxes removed without a teardown left behind, released in this pass (SandboxProvider.sweepStrays). */
  strays: string[];
}

export interface ReapOptions {
  dryRun?: boolean;
  now?: number;
  /** A sandbox whose record has no handle yet is only reaped once it is this old (provisioning may be under way). */
  provisioningGraceMs?: number;
}

type OwnerStatusOf = (workflowId: string, runId: string) => Promise<OwnerStatus>;

/** Why a sandbox goes (a reason) or stays (`keep` with the why), asking Temporal when `ownerStatus` is given. */
async function decide(record: SandboxRecord, ownerStatus: OwnerStatusOf | null, now: number, grace: number): Promise<{ reap: ReapReason } | { keep: string }> {
  const leaseExpired = Date.parse(record.leaseExpiresAt) <= now;
  const neverStarted = record.handle === null && now - Date.parse(record.createdAt) > grace;
  if (record.labels[SANDBOX_POOL_LABEL] !== undefined) {
    if (record.holderAlive === true) return { keep: `ready in the sandbox pool of ${record.heldByThisProcess ? 'this process' : 'a live worker process'}` };
    if (record.holderAlive === false) return { reap: 'holder-gone' };
  }
  if (ownerStatus === null) {
    if (record.holderAlive === true) return { keep: record.heldByThisProcess ? 'held by this process' : 'held by a live worker process' };
    if (record.holderAlive === false) return { reap: 'holder-gone' };
    if (leaseExpired) return { reap: 'lease-expired' };
    if (neverStarted) return { reap: 'never-started' };
    return { keep: 'no holder recorded and lease not expired; ask Temporal (rollout gc without --offline)' };
  }
  if (leaseExpired) return { reap: 'lease-expired' };
  if (neverStarted) return { reap: 'never-started' };
  const status = await ownerStatus(record.owner.workflowId, record.owner.runId);
  if (status === 'closed') return { reap: 'owner-closed' };
  if (status === 'missing') {
    // Unknown to this server but held by another live worker: a run against another Temporal server (an embedded one).
    if (record.holderAlive === true && record.heldByThisProcess !== true) return { keep: 'owner unknown to this Temporal server, held by another live worker process' };
    return { reap: 'owner-missing' };
  }
  return { keep: 'owner still running' };
}

/** Reaps what the rules above allow; `ownerStatus` null is the offline mode (no Temporal server). */
export async function reapSandboxes(provider: SandboxProvider, ownerStatus: OwnerStatusOf | null, options: ReapOptions = {}): Promise<ReapReport> {
  const now = options.now ?? Date.now();
  const grace = options.provisioningGraceMs ?? 5 * 60 * 1000;
  const report: ReapReport = { examined: 0, dryRun: options.dryRun ?? false, reaped: [], kept: [], errors: [], strays: [] };
  for (const record of await provider.list()) {
    report.examined++;
    try {
      const decision = await decide(record, ownerStatus, now, grace);
      if ('keep' in decision) {
        report.kept.push({ id: record.id, owner: record.owner, why: decision.keep });
        continue;
      }
      const processesKilled = report.dryRun ? 0 : (await provider.teardown(record.id)).processesKilled;
      report.reaped.push({ id: record.id, reason: decision.reap, owner: record.owner, processesKilled });
    } catch (err) {
      report.errors.push({ id: record.id, error: err instanceof Error ? err.message : String(err) });
    }
  }
  if (!report.dryRun && provider.sweepStrays) {
    try {
      report.strays = await provider.sweepStrays();
    } catch (err) {
      report.errors.push({ id: 'strays', error: err instanceof Error ? err.message : String(err) });
    }
  }
  return report;
}
