/**
 * What every fault case needs: worker processes with their own queues, host
 * id and sandbox registry; a group submitted to them; the leak count of a
 * sandbox root (registry entries, processes, mounts in any mount namespace,
 * directories, cgroups); and the summary row the suite prints.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { submitBatch } from '../../client/submitBatch.js';
import { ATTRIBUTED_MODEL_TYPES } from '../../shared/failures.js';
import type { GroupResult, PolicyConfig, RolloutLimits } from '../../shared/pipeline.js';
import { janitorScheduleId } from '../../workers/janitorSchedule.js';
import { mountsMentioning, processesMentioning } from '../helpers/localSandboxInspector.js';
import { uniqueTaskQueue } from '../helpers/temporal.js';
import type { NetnsHost } from '../helpers/netns/netnsHost.js';
import { startWorkerProcess, type WorkerProcess } from '../helpers/workerProcess.js';

export interface FaultRow {
  fault: string;
  faultsInjected: number;
  rolloutsAffected: number;
  completed: number;
  classifiedInfra: number;
  scoredModel: number;
  /** Rollouts with an attempt laid on the agent (an attributed model type): for a real infra fault, must be 0. */
  misattributed: number;
  leaks: number;
}

export interface Leaks {
  sandboxes: string[];
  processes: number[];
  mounts: string[];
  cgroups: string[];
}

export function countLeaks(l: Leaks): number {
  return l.sandboxes.length + l.processes.length + l.mounts.length + l.cgroups.length;
}

const CGROUP_ROOT = '/sys/fs/cgroup';

/** Every trace of the sandboxes under `sandboxRoot` left on the host. */
export function leaksUnder(sandboxRoot: string, sandboxIds: Iterable<string>): Leaks {
  const sandboxes = existsSync(sandboxRoot) ? readdirSync(sandboxRoot).filter((n) => !n.startsWith('.')) : [];
  const cgroups: string[] = [];
  for (const id of sandboxIds) {
    for (const controller of existsSync(CGROUP_ROOT) ? readdirSync(CGROUP_ROOT) : []) {
      for (const dir of [join(CGROUP_ROOT, controller, 'rollout-pipeline', id), join(CGROUP_ROOT, 'rollout-pipeline', id)]) if (existsSync(dir)) cgroups.push(dir);
    }
  }
  return { sandboxes, processes: processesMentioning(sandboxRoot), mounts: mountsMentioning(sandboxRoot), cgroups: [...new Set(cgroups)] };
}

export interface FaultHostOptions {
  /** Task queue prefix shared with other hosts (a pool of workers); a unique one by default. */
  queuePrefix?: string;
  /** The Temporal frontend its workers use (the test server by default). */
  address?: string;
  /** --store of its workers (fs in its own data dir by default). */
  store?: string;
  /**
   * A machine of its own (a test-made network and UTS namespace): its workers run in it and take
   * their host id from its hostname, which is the host's name.
   */
  netns?: NetnsHost;
  /** Worker Versioning: the deployment its workers belong to (--deployment-name); their build is startWorker's. */
  deploymentName?: string;
  /** Environment its workers get besides the defaults (a cluster's TEMPORAL_TLS_*). */
  env?: Record<string, string>;
}

/** One simulated host: a queue prefix, a host id, a data dir and a sandbox root, and its worker processes over time. */
export class FaultHost {
  readonly prefix: string;
  readonly hostId: string;
  readonly dataDir: string;
  readonly sandboxRoot: string;
  readonly workers: WorkerProcess[] = [];

  constructor(
    scratch: string,
    readonly name: string,
    private readonly options: FaultHostOptions = {},
  ) {
    this.prefix = options.queuePrefix ?? uniqueTaskQueue(`fault-${name}`);
    this.hostId = options.netns ? options.netns.name : options.queuePrefix ? `${options.queuePrefix}-${name}` : `${this.prefix}-host`;
    this.dataDir = join(scratch, name, 'data');
    this.sandboxRoot = join(scratch, name, 'sandboxes');
  }

  get taskQueues(): { main: string; policy: string } {
    return { main: this.prefix, policy: `${this.prefix}-policy` };
  }

  get trajectories(): string {
    return join(this.dataDir, 'trajectories');
  }

  /** The build the next startWorker runs when it names none (--build-id; unversioned while unset). */
  build: string | undefined;

  async startWorker(options: { address?: string; metricsPort?: number; build?: string; stopGraceSec?: number } = {}): Promise<WorkerProcess> {
    const { build = this.build, stopGraceSec, ...rest } = options;
    this.build = build;
    const args = [
      ...(build !== undefined ? ['--build-id', build, ...(this.options.deploymentName ? ['--deployment-name', this.options.deploymentName] : [])] : []),
      ...(stopGraceSec !== undefined ? ['--stop-grace', String(stopGraceSec)] : []),
    ];
    const worker = startWorkerProcess({
      args,
      queuePrefix: this.prefix,
      ...(this.options.netns ? { wrap: this.options.netns.wrap } : { hostId: this.hostId }),
      dataDir: this.dataDir,
      sandboxRoot: this.sandboxRoot,
      ...(this.options.address !== undefined ? { address: this.options.address } : {}),
      ...(this.options.store !== undefined ? { store: this.options.store } : {}),
      ...(this.options.env !== undefined ? { env: this.options.env } : {}),
      ...rest,
    });
    this.workers.push(worker);
    await worker.ready;
    return worker;
  }

  /** Sandbox ids any of this host's workers provisioned (from their logs). */
  sandboxIds(): string[] {
    return [...new Set(this.workers.flatMap((w) => w.lines.filter((l) => l.msg === 'sandbox provisioned').map((l) => String(l.sandbox))))];
  }

  leaks(): Leaks {
    return leaksUnder(this.sandboxRoot, this.sandboxIds());
  }

  async stop(client: Client): Promise<void> {
    for (const w of this.workers) {
      if (w.child.exitCode === null && w.child.signalCode === null) {
        w.kill('SIGTERM');
        await w.exited;
      }
    }
    await client.schedule.getHandle(janitorScheduleId(this.hostId)).delete().catch(() => undefined);
  }

  /**
   * Tears down every sandbox still under this host's state root, as its reaper would have: after a
   * case that failed midway (a host killed and never brought back) nothing else will.
   */
  async reapLeftovers(): Promise<number> {
    const provider = new LocalSandboxProvider({ stateRoot: this.sandboxRoot });
    const left = await provider.list();
    for (const record of left) await provider.teardown(record.id).catch(() => undefined);
    return left.length;
  }
}

export async function runGroups(
  client: Client,
  host: FaultHost,
  options: { batchId: string; tasks: string[]; groupSize: number; policy: PolicyConfig; limits?: Partial<RolloutLimits>; minValid?: number; policyCalls?: 'queue' | 'local'; attemptOn?: 'workflow' | 'host'; resume?: 'replay' | 'restart'; retries?: number },
): Promise<{ batch: Awaited<ReturnType<typeof submitBatch>>; results: () => Promise<GroupResult[]> }> {
  const batch = await submitBatch(client, {
    batchId: options.batchId,
    taskQueues: host.taskQueues,
    tasks: options.tasks,
    groupSize: options.groupSize,
    minValid: options.minValid ?? 1,
    policy: options.policy,
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.policyCalls ? { policyCalls: options.policyCalls } : {}),
    ...(options.attemptOn ? { attemptOn: options.attemptOn } : {}),
    ...(options.resume || options.retries !== undefined ? { failurePolicy: { ...(options.resume ? { resume: options.resume } : {}), ...(options.retries !== undefined ? { infra: { retries: options.retries, backoffSec: 1, onExhausted: 'mask' as const } } : {}) } } : {}),
  });
  return {
    batch,
    results: async () => {
      const out: GroupResult[] = [];
      for await (const g of batch.results()) out.push(g);
      return out;
    },
  };
}

/** The row of the summary table for a case's rollouts. */
export function rowFor(fault: string, faultsInjected: number, groups: GroupResult[], affected: number, leaks: number): FaultRow {
  const rollouts = groups.flatMap((g) => g.rollouts);
  return {
    fault,
    faultsInjected,
    rolloutsAffected: affected,
    completed: rollouts.filter((r) => r.reward !== null).length,
    classifiedInfra: rollouts.filter((r) => r.attemptHistory.some((a) => a.outcomeClass === 'infra')).length,
    scoredModel: rollouts.filter((r) => r.outcomeClass === 'model').length,
    misattributed: rollouts.filter((r) => r.attemptHistory.some((a) => a.outcomeClass === 'model' && (ATTRIBUTED_MODEL_TYPES as readonly string[]).includes(a.outcomeType))).length,
    leaks,
  };
}

export function summaryTable(rows: FaultRow[]): string {
  const header = ['fault', 'faults injected', 'rollouts affected', 'completed', 'classified infra', 'scored model', 'misattributed', 'leaks'];
  const body = rows.map((r) => [r.fault, r.faultsInjected, r.rolloutsAffected, r.completed, r.classifiedInfra, r.scoredModel, r.misattributed, r.leaks].map(String));
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => (b[i] ?? '').length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join(' | ')} |`;
  return [line(header), `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`, ...body.map(line)].join('\n');
}

/** Case 10's row: one batch with its sandboxes lost mid-rollout, restarted or resumed. */
export interface ResumeRow {
  resume: 'restart' | 'replay';
  rollouts: number;
  failures: number;
  /** Model calls in all, and asked again per infra failure (beyond one per turn of the finished rollouts). */
  calls: number;
  callsAgain: number;
  /** Completion tokens in all, and generated again per infra failure. */
  generated: number;
  tokensAgain: number;
  /** The replay's own time per restored call, and the state digest's per call of the original attempt. */
  replayPerCallMs: number | null;
  digestPerCallMs: number | null;
}

export function resumeCostTable(rows: ResumeRow[]): string {
  const ms = (v: number | null): string => (v === null ? '-' : `${v.toFixed(1)} ms`);
  const lines = ['| resume | rollouts | infra failures | model calls | asked again per failure | tokens generated | generated again per failure | replay per restored call | digest per call |', '|:--|--:|--:|--:|--:|--:|--:|--:|--:|'];
  for (const r of rows) lines.push(`| ${r.resume} | ${r.rollouts} | ${r.failures} | ${r.calls} | ${r.callsAgain} | ${r.generated} | ${Math.round(r.tokensAgain)} | ${ms(r.replayPerCallMs)} | ${ms(r.digestPerCallMs)} |`);
  return lines.join('\n');
}
