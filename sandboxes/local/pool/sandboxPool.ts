/**
 * Pool stage of the local provider: sandboxes provisioned ahead of demand,
 * per sandbox shape (the spec without owner, labels and lease: the task
 * version's lower layer, limits, env, mounts, network) on this host, so a
 * rollout's provision takes a ready one instead of waiting for bwrap.
 *
 * - Fresh: a pooled sandbox is handed out once and never comes back; nothing
 *   ran in it before (its only process is the keeper), so the reset and
 *   isolation guarantees are those of a new one.
 * - Sized from demand: each shape keeps as many ready as it had provisions in
 *   the last `windowMs` (the recent rate), at most `max` in all. Refills run
 *   one at a time in the background; shapes without demand are trimmed.
 * - Accounted: each is a registered sandbox (record, cgroup, limits) whose
 *   owner is the pool (POOL_LABEL) and whose holder is this process, so it
 *   counts in the sandboxes-alive gauge, the reaper keeps it while this
 *   process lives and removes it once it is gone (worker start, `rollout gc`).
 * - Drained at worker shutdown (drain()).
 */
import { createHash } from 'node:crypto';
import { SANDBOX_POOL_LABEL, type ProvisionResult, type ResolvedSandboxSpec } from '../../../shared/sandbox.js';
import type { LocalSandboxContext } from '../localSandboxContext.js';

/** Label on a sandbox the pool holds ready; the reaper keeps such a sandbox exactly while its holder lives. */
export const POOL_LABEL = SANDBOX_POOL_LABEL;
export const POOL_OWNER_PREFIX = 'sandbox-pool/';

export interface SandboxPoolOptions {
  /** Most sandboxes held ready at once, over every shape; 0 turns the pool off. */
  max: number;
  /** How far back provisions count as demand (ms). */
  windowMs?: number;
}

interface Ready {
  result: ProvisionResult;
}

interface Shape {
  spec: ResolvedSandboxSpec;
  ready: Ready[];
  /** Times (ms) of recent provisions of this shape. */
  demand: number[];
  refilling: boolean;
}

/** The pool's key for a spec: everything that makes two sandboxes the same, nothing of who owns them. */
export function shapeKey(spec: ResolvedSandboxSpec): string {
  const shape: Partial<ResolvedSandboxSpec> = { ...spec };
  delete shape.owner;
  delete shape.labels;
  delete shape.leaseMs;
  return createHash('sha256').update(JSON.stringify(shape)).digest('hex').slice(0, 16);
}

export class SandboxPool {
  private readonly shapes = new Map<string, Shape>();
  private readonly windowMs: number;
  private readonly inFlight = new Set<Promise<unknown>>();
  private draining = false;
  private trimTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: LocalSandboxContext,
    private readonly options: SandboxPoolOptions,
    private readonly provisionFresh: (spec: ResolvedSandboxSpec) => Promise<ProvisionResult>,
    private readonly teardown: (id: string) => Promise<unknown>,
    private readonly onError: (message: string) => void,
  ) {
    this.windowMs = options.windowMs ?? 10_000;
  }

  get size(): number {
    let n = 0;
    for (const shape of this.shapes.values()) n += shape.ready.length;
    return n;
  }

  /**
   * A ready sandbox of this spec's shape, now owned as the spec says, or undefined
   * (none ready; the caller provisions). Either way the demand is noted and a refill started.
   */
  async take(spec: ResolvedSandboxSpec): Promise<ProvisionResult | undefined> {
    if (this.draining || this.options.max <= 0) return undefined;
    const key = shapeKey(spec);
    let shape = this.shapes.get(key);
    if (!shape) {
      shape = { spec, ready: [], demand: [], refilling: false };
      this.shapes.set(key, shape);
    }
    const now = Date.now();
    shape.demand.push(now);
    this.forget(shape, now);
    const taken = await this.claimReady(shape, spec);
    this.refill(shape);
    this.scheduleTrim();
    return taken;
  }

  /** Hands out the first ready sandbox still alive, rewritten to the spec's owner, labels and lease. */
  private async claimReady(shape: Shape, spec: ResolvedSandboxSpec): Promise<ProvisionResult | undefined> {
    for (let entry = shape.ready.shift(); entry; entry = shape.ready.shift()) {
      const { handle } = entry.result;
      const record = await this.ctx.registry.get(handle.id);
      if (!record || !record.handle) continue; // reaped or torn down meanwhile
      const now = Date.now();
      try {
        await this.ctx.registry.write({ ...record, owner: spec.owner, labels: spec.labels, leaseExpiresAt: new Date(now + spec.leaseMs).toISOString() });
      } catch (err) {
        this.onError(`sandbox pool: cannot hand out ${handle.id}: ${err instanceof Error ? err.message : String(err)}`);
        this.track(this.teardown(handle.id));
        continue;
      }
      return entry.result;
    }
    return undefined;
  }

  /** How many of this shape to hold ready: its provisions in the window, within what max leaves. */
  private target(shape: Shape): number {
    let others = 0;
    for (const s of this.shapes.values()) if (s !== shape) others += s.ready.length;
    return Math.max(0, Math.min(shape.demand.length, this.options.max - others));
  }

  private forget(shape: Shape, now: number): void {
    while (shape.demand.length > 0 && (shape.demand[0] as number) < now - this.windowMs) shape.demand.shift();
  }

  private refill(shape: Shape): void {
    if (shape.refilling || this.draining) return;
    shape.refilling = true;
    const run = (async () => {
      try {
        while (!this.draining && shape.ready.length < this.target(shape)) {
          const spec: ResolvedSandboxSpec = {
            ...shape.spec,
            owner: { workflowId: `${POOL_OWNER_PREFIX}${this.ctx.host}`, runId: String(process.pid), attempt: 0 },
            labels: { [POOL_LABEL]: 'idle' },
            // Beyond any idle time the trim allows; the reaper's lease check is only a backstop.
            leaseMs: Math.max(60 * 60 * 1000, this.windowMs * 10),
          };
          const result = await this.provisionFresh(spec);
          if (this.draining) {
            await this.teardown(result.handle.id);
            break;
          }
          shape.ready.push({ result });
        }
      } catch (err) {
        this.onError(`sandbox pool: a refill failed (the next provision tries again): ${err instanceof Error ? err.message : String(err)}`);
      } finally {
        shape.refilling = false;
      }
    })();
    this.track(run);
  }

  /** Tears down what shapes without recent demand hold beyond their target, once the window has passed. */
  private scheduleTrim(): void {
    if (this.trimTimer || this.draining) return;
    this.trimTimer = setTimeout(() => {
      this.trimTimer = undefined;
      const now = Date.now();
      let left = 0;
      for (const [key, shape] of this.shapes) {
        this.forget(shape, now);
        const excess = shape.ready.splice(this.target(shape));
        for (const entry of excess) this.track(this.teardown(entry.result.handle.id));
        left += shape.ready.length;
        if (shape.ready.length === 0 && shape.demand.length === 0 && !shape.refilling) this.shapes.delete(key);
      }
      if (left > 0) this.scheduleTrim();
    }, this.windowMs);
    this.trimTimer.unref();
  }

  private track(p: Promise<unknown>): void {
    const tracked = p.catch((err: unknown) => this.onError(`sandbox pool: ${err instanceof Error ? err.message : String(err)}`)).finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
  }

  /** Resolves once no refill or trim is under way (benchmarks measure the next cycle without one running beside it). */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** Stops refilling and tears down every sandbox the pool holds; the provider still provisions after it, without the pool. */
  async drain(): Promise<number> {
    this.draining = true;
    if (this.trimTimer) clearTimeout(this.trimTimer);
    this.trimTimer = undefined;
    await this.settled();
    let removed = 0;
    for (const shape of this.shapes.values()) {
      for (const entry of shape.ready.splice(0)) {
        await this.teardown(entry.result.handle.id);
        removed++;
      }
    }
    this.shapes.clear();
    return removed;
  }
}
