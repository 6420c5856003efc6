/**
 * One configuration of the cluster benchmark: a Temporal server that is already up (the dev
 * server, or the local cluster), N worker hosts started for it, one warm-up group (a policy with no
 * latency, unmeasured), a pause, an idle window and the measured batch. Every counter (CPU of each
 * component's cgroup, the workers' own CPU, the server's metrics, PostgreSQL's statistics and WAL)
 * is read four times over the idle window (A ... B; the idle rate of a counter is the median of its
 * three windows' rates) and once more at D, a pause after the last group came back (the pause lets
 * PostgreSQL's statistics arrive). Per rollout = ((D - B) - idle rate × (tD - tB)) / N: what the
 * batch added on top of a system that polls, heartbeats its membership and renews its shards while
 * nothing runs. Gross per rollout and the idle rates are kept too.
 */
import { Client, Connection } from '@temporalio/client';
import { submitBatch } from '../client/submitBatch.js';
import type { Placement } from './context.js';
import type { GroupResult, PolicyConfig, RolloutResult } from '../shared/pipeline.js';
import { summarize, type Summary } from '../shared/stats.js';
import { temporalSettings } from '../workers/temporalConnection.js';
import { countLeaks } from '../test/faults/faultKit.js';
import type { Reachable } from '../test/helpers/netns/netnsHost.js';
import { BenchHost } from './benchHost.js';
import type { CgroupCpu } from './cgroupCpu.js';
import type { CleanupStack } from './cleanupStack.js';
import { readDbCounters, WalCommitCounter } from './pgCounters.js';
import { loadAverages } from './procStats.js';
import { scrapeServer } from './serverMetrics.js';

/** The cgroup every worker host's worker and sandboxes run in. */
export const HOSTS_GROUP = 'worker hosts';
export const BENCH_GROUP = 'bench';

export interface ServerUnderTest {
  kind: 'dev server' | 'cluster';
  address: string;
  namespace: string;
  metricsUrls: string[];
  /** PostgreSQL of the cluster (none for the dev server's SQLite), and its data directory (for pg_waldump). */
  pgUrl?: string;
  pgDataDir?: string;
  /** The cgroups of the server's processes, in table order. */
  components: string[];
  /** TEMPORAL_TLS_* its clients need (the cluster's mTLS); none for the dev server. */
  clientEnv?: Record<string, string>;
}

export interface ConfigEnv {
  scratch: string;
  taskDirs: string[];
  cgroups: CgroupCpu;
  cleanup: CleanupStack;
  policy: PolicyConfig;
  warmPolicy: PolicyConfig;
  /** The policy endpoints a netns host must reach (the frontend is added per server). */
  policyEndpoints: Reachable[];
  log: (line: string) => void;
  /** group.policyCalls and group.attemptOn of the batches (--policy-calls, --attempt-on). */
  placement?: Placement;
}

export interface ConfigSpec {
  label: string;
  hosts: number;
  netns: boolean;
  groups: number;
  groupSize: number;
  idleMs: number;
  settleMs: number;
}

export interface ConfigResult {
  label: string;
  server: ServerUnderTest['kind'];
  components: string[];
  hosts: number;
  hostKind: 'netns' | 'process';
  rollouts: number;
  ok: number;
  errors: number;
  errorTypes: Record<string, number>;
  leaks: number;
  /** Submit to the last group's result. */
  wallMs: number;
  rolloutsPerSecond: number;
  /** Rollout workflow start to close (visibility). */
  e2e: Summary;
  /** The counters' window, B to D. */
  windowMs: number;
  idleWindowMs: number;
  /** Counter name → per rollout, idle rate subtracted. Names: `cpu:<component>`, `db:*`, `server:*`. */
  perRollout: Record<string, number>;
  perRolloutGross: Record<string, number>;
  idlePerSecond: Record<string, number>;
  /** Mean UpdateWorkflowExecution latency seen by the history service during the window, ms. */
  updateLatencyMs: number | null;
  loadAverageStart: [number, number, number];
  loadAverageEnd: [number, number, number];
}

type Snapshot = { t: number; values: Record<string, number> };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Every counter at one moment. Reading them costs CPU too (parsing five metrics pages, a query to
 * PostgreSQL, walking /proc): what each cgroup spent between the first reading and the last is
 * added to `overheadMs` and taken out of every later reading, so no window pays for the readings.
 */
interface Readers {
  hosts: BenchHost[];
  /** CPU the readings themselves cost, per cgroup, so far. */
  overheadMs: Record<string, number>;
  wal: WalCommitCounter | undefined;
}

async function snapshot(env: ConfigEnv, server: ServerUnderTest, { hosts, overheadMs, wal }: Readers): Promise<Snapshot> {
  const t = Date.now();
  const before = env.cgroups.usageMs();
  const workers = hosts.reduce((a, h) => a + h.workerCpuMs(), 0);
  const values: Record<string, number> = {};
  for (const c of [...server.components, BENCH_GROUP]) values[`cpu:${c}`] = (before[c] ?? 0) - (overheadMs[c] ?? 0);
  values['cpu:rollout workers'] = workers;
  values['cpu:sandboxes'] = (before[HOSTS_GROUP] ?? 0) - (overheadMs[HOSTS_GROUP] ?? 0) - workers;
  for (const [k, v] of Object.entries(await scrapeServer(server.metricsUrls))) values[`server:${k}`] = v;
  if (server.pgUrl) {
    const db = await readDbCounters(server.pgUrl);
    for (const [k, v] of Object.entries(db)) values[`db:${k}`] = v;
    const commits = wal?.advance(db.walBytes);
    if (commits !== undefined && commits !== null) values['db:writeTransactions'] = commits;
  }
  const after = env.cgroups.usageMs();
  for (const [c, ms] of Object.entries(after)) overheadMs[c] = (overheadMs[c] ?? 0) + ms - (before[c] ?? 0);
  return { t, values };
}

function rates(a: Snapshot, b: Snapshot): Record<string, number> {
  const s = Math.max(0.001, (b.t - a.t) / 1000);
  return Object.fromEntries(Object.keys(b.values).map((k) => [k, ((b.values[k] ?? 0) - (a.values[k] ?? 0)) / s]));
}

/** Per counter, the median of its rates over consecutive windows: one janitor run or GC in one window does not set the idle rate. */
function medianRates(snapshots: Snapshot[]): Record<string, number> {
  const windows = snapshots.slice(1).map((s, i) => rates(snapshots[i] as Snapshot, s));
  const keys = Object.keys(windows[0] ?? {});
  return Object.fromEntries(
    keys.map((k) => {
      const sorted = windows.map((w) => w[k] ?? 0).sort((x, y) => x - y);
      return [k, sorted[Math.floor(sorted.length / 2)] ?? 0];
    }),
  );
}

/** Windows the idle rate is the median of. */
const IDLE_WINDOWS = 3;

/** Rollout end to end from visibility, once every rollout of the batch is listed closed. */
async function rolloutDurations(client: Client, batchId: string, expected: number): Promise<number[]> {
  const query = `WorkflowType = "rollout" AND RolloutBatch = "${batchId}" AND ExecutionStatus = "Completed"`;
  let e2e: number[] = [];
  for (let tries = 0; tries < 60; tries++) {
    e2e = [];
    for await (const w of client.workflow.list({ query })) if (w.closeTime) e2e.push(w.closeTime.getTime() - w.startTime.getTime());
    if (e2e.length >= expected) break;
    await sleep(500);
  }
  return e2e;
}

async function collect(client: Client, options: Parameters<typeof submitBatch>[1]): Promise<GroupResult[]> {
  const batch = await submitBatch(client, options);
  const groups: GroupResult[] = [];
  for await (const g of batch.results()) groups.push(g);
  return groups;
}

export async function runConfig(env: ConfigEnv, server: ServerUnderTest, spec: ConfigSpec): Promise<ConfigResult> {
  const loadAverageStart = loadAverages();
  const { tls } = temporalSettings(server.address, server.clientEnv ?? {});
  const connection = await Connection.connect({ address: server.address, ...(tls ? { tls } : {}) });
  const closeConnection = env.cleanup.push(`connection to ${server.address}`, () => connection.close());
  const client = new Client({ connection, namespace: server.namespace });
  const hosts: BenchHost[] = [];
  const stopHosts = env.cleanup.push(`worker hosts of ${spec.label}`, async () => {
    for (const h of hosts) await h.destroy(client);
  });
  try {
    const [frontendIp, frontendPort] = server.address.split(':');
    const reachable = [{ host: frontendIp as string, port: Number(frontendPort) }, ...env.policyEndpoints];
    const tag = spec.label.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '');
    const queuePrefix = `cb-${tag}-${Date.now().toString(36)}`;
    const started = await Promise.allSettled(
      Array.from({ length: spec.hosts }, (_, i) =>
        BenchHost.start({
          name: `${tag}-${String.fromCharCode(97 + i)}`,
          dir: `${env.scratch}/${tag}/host-${i}`,
          queuePrefix,
          address: server.address,
          clientEnv: server.clientEnv ?? {},
          store: `fs:${env.scratch}/${tag}/trajectories`,
          reachable,
          netns: spec.netns,
          cgroupPrefix: env.cgroups.joinPrefix(HOSTS_GROUP),
        }),
      ),
    );
    for (const s of started) if (s.status === 'fulfilled') hosts.push(s.value);
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw new Error(`a worker host of ${spec.label} did not start: ${failed.reason instanceof Error ? failed.reason.message : String(failed.reason)}`);
    const taskQueues = { main: queuePrefix, policy: `${queuePrefix}-policy` };
    env.log(`  ${spec.label}: ${hosts.length} worker host(s) up (${hosts[0]?.kind}); warm-up group`);
    const warm = await collect(client, {
      batchId: `${queuePrefix}-warmup`,
      tasks: env.taskDirs.slice(0, 1),
      groupSize: Math.max(2, spec.hosts),
      minValid: 1,
      policy: env.warmPolicy,
      taskQueues,
      ...env.placement,
    });
    for (const g of warm) if (g.status !== 'complete') throw new Error(`warm-up group of ${spec.label} ${g.status}: ${g.statusReason}`);

    await sleep(spec.settleMs);
    const readers: Readers = { hosts, overheadMs: {}, wal: server.pgDataDir ? new WalCommitCounter(server.pgDataDir) : undefined };
    const idleSnapshots = [await snapshot(env, server, readers)];
    for (let i = 0; i < IDLE_WINDOWS; i++) {
      await sleep(spec.idleMs / IDLE_WINDOWS);
      idleSnapshots.push(await snapshot(env, server, readers));
    }
    const a = idleSnapshots[0] as Snapshot;
    const b = idleSnapshots[IDLE_WINDOWS] as Snapshot;
    const rollouts = spec.groups * spec.groupSize;
    const batchId = `${queuePrefix}-batch`;
    env.log(`  ${spec.label}: ${spec.groups} groups × ${spec.groupSize} = ${rollouts} rollouts`);
    const submitted = Date.now();
    const groups = await collect(client, {
      batchId,
      tasks: env.taskDirs.slice(0, spec.groups),
      groupSize: spec.groupSize,
      minValid: 1,
      policy: env.policy,
      taskQueues,
      ...env.placement,
      // The benchmark counts errors; it must not hide them behind retries.
      failurePolicy: { ...env.placement?.failurePolicy, infra: { retries: 0, backoffSec: 1, onExhausted: 'mask' } },
    });
    const wallMs = Date.now() - submitted;
    await sleep(spec.settleMs);
    const d = await snapshot(env, server, readers);
    const e2e = await rolloutDurations(client, batchId, rollouts);

    for (const h of hosts) await h.stopWorker();
    const leaks = hosts.reduce((n, h) => n + countLeaks(h.leaks()), 0);
    const all: RolloutResult[] = groups.flatMap((g) => g.rollouts);
    const notOk = all.filter((r) => r.outcomeClass !== 'ok' || r.reward !== 1);
    const errorTypes: Record<string, number> = {};
    for (const r of notOk) errorTypes[`${r.outcomeClass}/${r.outcomeType}`] = (errorTypes[`${r.outcomeClass}/${r.outcomeType}`] ?? 0) + 1;

    if (readers.wal?.lastError) env.log(`  ${spec.label}: write transactions not counted: ${readers.wal.lastError}`);
    const idle = medianRates(idleSnapshots);
    const windowS = (d.t - b.t) / 1000;
    const perRollout: Record<string, number> = {};
    const perRolloutGross: Record<string, number> = {};
    for (const k of Object.keys(d.values)) {
      const gross = (d.values[k] ?? 0) - (b.values[k] ?? 0);
      perRolloutGross[k] = gross / rollouts;
      perRollout[k] = (gross - (idle[k] ?? 0) * windowS) / rollouts;
    }
    const latencyCount = (d.values['server:updateLatencyCount'] ?? 0) - (b.values['server:updateLatencyCount'] ?? 0);
    const latencySum = (d.values['server:updateLatencySumMs'] ?? 0) - (b.values['server:updateLatencySumMs'] ?? 0);
    for (const k of ['server:updateLatencyCount', 'server:updateLatencySumMs']) {
      delete perRollout[k];
      delete perRolloutGross[k];
      delete idle[k];
    }
    return {
      label: spec.label,
      server: server.kind,
      components: server.components,
      hosts: hosts.length,
      hostKind: hosts[0]?.kind ?? (spec.netns ? 'netns' : 'process'),
      rollouts,
      ok: all.length - notOk.length,
      errors: notOk.length + (rollouts - all.length),
      errorTypes,
      leaks,
      wallMs,
      rolloutsPerSecond: rollouts / (wallMs / 1000),
      e2e: summarize(e2e),
      windowMs: d.t - b.t,
      idleWindowMs: b.t - a.t,
      perRollout,
      perRolloutGross,
      idlePerSecond: idle,
      updateLatencyMs: latencyCount > 0 ? latencySum / latencyCount : null,
      loadAverageStart,
      loadAverageEnd: loadAverages(),
    };
  } finally {
    await stopHosts();
    await closeConnection();
  }
}
