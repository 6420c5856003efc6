/**
 * The control for failure attribution: the task's verifier run on the
 * untouched start, in a fresh sandbox on this host. A verifier that completes
 * there (any reward) but crashed or timed out on an attempt's final state was
 * broken by that state; one that fails there too is broken for every state
 * (or the host is), which is infrastructure.
 *
 * Results are kept per task version on this host (one cache per worker, so
 * per host): a passing control is reused until it is older than `ttlMs`; a
 * failing one is never reused, so the next failure runs it again. Whenever a
 * cached pass is reused, a health probe (provision a sandbox, run a command)
 * shows the host can still do both at that moment.
 */
import type { SandboxProvider, SandboxSpec } from '../../shared/sandbox.js';
import type { LoadedTask } from '../../shared/task.js';
import { verifyInPlace, type VerifyOptions } from '../runVerifier.js';

export interface ControlResult {
  /** The verifier completed on the untouched start (wrote a reward within its timeout). */
  completed: boolean;
  /** The reward it gave the untouched start, when it completed. */
  reward: number | null;
  /** What happened, for the evidence. */
  detail: string;
  /** When the control ran (ms since the epoch). */
  ranAt: number;
  durationMs: number;
}

export interface ControlEvidence {
  control: ControlResult;
  /** Whether the control came from the cache (then `probe` says the host is healthy now). */
  cached: boolean;
  /** The health probe run with a cached control: null when the control itself just ran (that was the probe). */
  probe: { ok: boolean; detail: string } | null;
}

export const CONTROL_TTL_MS = 10 * 60 * 1000;

export class VerifierControls {
  private readonly results = new Map<string, ControlResult>();
  private readonly running = new Map<string, Promise<ControlResult>>();

  constructor(
    private readonly provider: SandboxProvider,
    private readonly host: string,
    private readonly ttlMs = CONTROL_TTL_MS,
  ) {}

  /**
   * The control for this task version on this host, run now unless a passing
   * one is fresh. `spec` is the sandbox spec of a fresh, untouched start.
   * Throws only when the host cannot provision or exec at all (that is
   * evidence too: the caller keeps the failure infra).
   */
  async evidence(task: LoadedTask, spec: SandboxSpec, options: VerifyOptions = {}): Promise<ControlEvidence> {
    const key = `${task.version}@${this.host}`;
    const cached = this.results.get(key);
    if (cached?.completed && Date.now() - cached.ranAt < this.ttlMs) return { control: cached, cached: true, probe: await this.probe(spec) };
    let run = this.running.get(key);
    if (!run) {
      run = this.run(task, spec, options).finally(() => this.running.delete(key));
      this.running.set(key, run);
    }
    const control = await run;
    if (control.completed) this.results.set(key, control);
    else this.results.delete(key);
    return { control, cached: false, probe: null };
  }

  private async run(task: LoadedTask, spec: SandboxSpec, options: VerifyOptions): Promise<ControlResult> {
    const started = performance.now();
    const ranAt = Date.now();
    const { handle } = await this.provider.provision({ ...spec, labels: { ...spec.labels, purpose: 'verifier-control' } });
    try {
      const outcome = await verifyInPlace(this.provider, handle, task, options);
      return { completed: true, reward: outcome.reward, detail: `wrote reward ${outcome.reward} (test.sh exit ${outcome.exitCode})`, ranAt, durationMs: performance.now() - started };
    } catch (err) {
      return { completed: false, reward: null, detail: err instanceof Error ? err.message : String(err), ranAt, durationMs: performance.now() - started };
    } finally {
      await this.provider.teardown(handle);
    }
  }

  /** Can this host provision a sandbox and run a command in it now? */
  private async probe(spec: SandboxSpec): Promise<{ ok: boolean; detail: string }> {
    const started = performance.now();
    try {
      const { handle } = await this.provider.provision({ ...spec, labels: { ...spec.labels, purpose: 'health-probe' } });
      try {
        const run = await this.provider.exec(handle, 'true', { timeoutMs: 30_000 });
        if (run.exitCode !== 0) return { ok: false, detail: `a command in a fresh sandbox exited ${run.exitCode}: ${run.stderr.trim().slice(0, 300)}` };
      } finally {
        await this.provider.teardown(handle);
      }
      return { ok: true, detail: `provisioned a fresh sandbox and ran a command in it in ${Math.round(performance.now() - started)} ms` };
    } catch (err) {
      return { ok: false, detail: `cannot provision a sandbox and run a command: ${err instanceof Error ? err.message : String(err)}` };
    }
  }
}
