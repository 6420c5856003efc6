/**
 * A pipeline worker process of a benchmark run (spawned by
 * bench/pipelineRun.ts with an IPC channel): createPipelineWorkers over local
 * sandboxes and a filesystem trajectory store, for the roles and with the
 * worker options under test. A process of its own so that its RSS, peak RSS
 * (VmHWM) and CPU are the worker's alone, not the bench's policy server's or
 * client's, and every configuration starts from a fresh heap, as `rollout
 * worker` does in production.
 *
 * It samples its workers' status every 100 ms (slots in use, cached
 * workflows), its memory, and the event loop's delay. Messages:
 * {type: 'report'} -> the numbers so far; {type: 'stop'} -> shuts down and exits.
 */
import childProcess from 'node:child_process';
import { readFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Runtime, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { pipelineMetrics } from '../agent/pipelineMetrics.js';
import { temporalOwnerStatus } from '../activities/reaper/temporalOwnerStatus.js';
import { LocalSandboxProvider } from '../sandboxes/local/localSandboxProvider.js';
import type { SpawnVia } from '../sandboxes/local/sandboxSpawner.js';
import { FsTrajectoryStore } from '../stores/fsTrajectoryStore.js';
import type { ProvisionResult, SandboxSpec } from '../shared/sandbox.js';
import { createLogger, installRuntime } from '../workers/logger.js';
import { createPipelineWorkers, DEFAULT_SLOTS, type PipelineWorkerOptions, type WorkerRole } from '../workers/pipelineWorkers.js';
import { processMemoryKb } from './procStats.js';

export type WorkerTuning = Pick<
  PipelineWorkerOptions,
  | 'maxConcurrentWorkflowTasks'
  | 'maxConcurrentProvisions'
  | 'maxConcurrentToolCalls'
  | 'maxConcurrentPolicyCalls'
  | 'maxConcurrentAttemptsOnHost'
  | 'maxCachedWorkflows'
  | 'workflowTaskPollers'
  | 'activityTaskPollers'
>;

/** The worker options under test and how the three workers are spread over processes (default: one process). */
export interface WorkerSetup {
  tuning: WorkerTuning;
  processes?: WorkerRole[][];
  /** Where the local provider spawns sandbox commands (default: its own default, the spawn broker). */
  sandboxSpawn?: SpawnVia;
}

export interface BenchWorkerConfig {
  address: string;
  taskQueues: { main: string; policy: string };
  hostId: string;
  sandboxRoot: string;
  dataDir: string;
  /** JSON file with the prebuilt workflow bundle ({code, sourceMap}). */
  bundleFile: string;
  /** Prometheus endpoint of this process (the SDK's metrics), or none. */
  metricsPort?: number;
  roles: WorkerRole[];
  tuning: WorkerTuning;
  sandboxSpawn?: SpawnVia;
}

type Gauge = 'workflowActivations' | 'cachedWorkflows' | 'provisions' | 'hostActivities' | 'policyActivities';

export interface BenchWorkerReport {
  type: 'report';
  pid: number;
  roles: WorkerRole[];
  rssKb: number;
  hwmKb: number;
  /** Peaks of process.memoryUsage() over the run, KiB. */
  memoryPeakKb: { heapUsed: number; external: number; arrayBuffers: number };
  sandboxIds: string[];
  /** Most at once of each kind of work, and the share of samples at its slot limit. */
  peaks: Partial<Record<Gauge, number>>;
  atSlotLimit: Partial<Record<Gauge, number>>;
  samples: number;
  eventLoopDelayMs: { p50: number; p99: number; max: number };
  /** spawn() calls (sandbox commands, launchers) and how long they blocked the event loop. */
  spawn: { calls: number; totalMs: number; maxMs: number };
}

class RecordingProvider extends LocalSandboxProvider {
  readonly ids = new Set<string>();

  override async provision(spec: SandboxSpec): Promise<ProvisionResult> {
    const result = await super.provision(spec);
    this.ids.add(result.handle.id);
    return result;
  }
}

// How long spawn() itself blocks this process's event loop (fork + exec of a large process is not free):
// every sandbox command is one spawn. Counted by wrapping the builtin before any of it is used.
const spawnStats = { calls: 0, totalMs: 0, maxMs: 0 };
const originalSpawn = childProcess.spawn;
childProcess.spawn = function timedSpawn(this: unknown, ...args: unknown[]) {
  const started = performance.now();
  try {
    return (originalSpawn as (...a: unknown[]) => childProcess.ChildProcess).apply(this, args);
  } finally {
    const ms = performance.now() - started;
    spawnStats.calls++;
    spawnStats.totalMs += ms;
    spawnStats.maxMs = Math.max(spawnStats.maxMs, ms);
  }
} as typeof childProcess.spawn;
syncBuiltinESMExports();

const config = JSON.parse(process.argv[2] ?? '{}') as BenchWorkerConfig;
const logger = createLogger(`bench-worker-${config.roles.join('+')}`);
logger.level = process.env.LOG_LEVEL ?? 'warn';
installRuntime(logger, config.metricsPort ? { metricsAddress: `127.0.0.1:${config.metricsPort}` } : {});
const connection = await NativeConnection.connect({ address: config.address });
const clientConnection = await Connection.connect({ address: config.address });
const client = new Client({ connection: clientConnection });
const provider = new RecordingProvider({ stateRoot: config.sandboxRoot, ...(config.sandboxSpawn ? { spawnVia: config.sandboxSpawn } : {}) });
const store = new FsTrajectoryStore(join(config.dataDir, 'trajectories'));
const workers = await createPipelineWorkers({
  connection,
  provider,
  store,
  host: config.hostId,
  workerIdentity: `bench-${process.pid}@${config.hostId}`,
  logger,
  ownerStatus: temporalOwnerStatus(client),
  metrics: pipelineMetrics(Runtime.instance().metricMeter),
  taskQueues: config.taskQueues,
  roles: config.roles,
  ...(config.roles.includes('workflows') ? { workflowBundle: JSON.parse(readFileSync(config.bundleFile, 'utf8')) as WorkflowBundleWithSourceMap } : {}),
  ...config.tuning,
});
const done = workers.run();
const { main, host, policy } = workers.byQueue;

const slots: Record<Exclude<Gauge, 'cachedWorkflows'>, number> = {
  workflowActivations: config.tuning.maxConcurrentWorkflowTasks ?? DEFAULT_SLOTS.workflowTasks,
  provisions: config.tuning.maxConcurrentProvisions ?? DEFAULT_SLOTS.provisions,
  hostActivities: config.tuning.maxConcurrentToolCalls ?? DEFAULT_SLOTS.toolCalls,
  policyActivities: config.tuning.maxConcurrentPolicyCalls ?? DEFAULT_SLOTS.policyCalls,
};
const peaks: Partial<Record<Gauge, number>> = {};
const atLimit: Partial<Record<Gauge, number>> = {};
const memoryPeakKb = { heapUsed: 0, external: 0, arrayBuffers: 0 };
let samples = 0;
const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();

const sampler = setInterval(() => {
  samples++;
  const now: Partial<Record<Gauge, number>> = {};
  if (main) {
    const s = main.getStatus();
    if (config.roles.includes('workflows')) {
      now.workflowActivations = s.numInFlightWorkflowActivations;
      now.cachedWorkflows = s.numCachedWorkflows;
    }
    if (config.roles.includes('provision')) now.provisions = s.numInFlightNonLocalActivities;
  }
  if (host) now.hostActivities = host.getStatus().numInFlightNonLocalActivities;
  if (policy) now.policyActivities = policy.getStatus().numInFlightNonLocalActivities;
  for (const [k, v] of Object.entries(now) as [Gauge, number][]) {
    peaks[k] = Math.max(peaks[k] ?? 0, v);
    if (k !== 'cachedWorkflows' && v >= slots[k]) atLimit[k] = (atLimit[k] ?? 0) + 1;
    else atLimit[k] ??= 0;
  }
  if (samples % 10 === 0) {
    const m = process.memoryUsage();
    memoryPeakKb.heapUsed = Math.max(memoryPeakKb.heapUsed, m.heapUsed / 1024);
    memoryPeakKb.external = Math.max(memoryPeakKb.external, m.external / 1024);
    memoryPeakKb.arrayBuffers = Math.max(memoryPeakKb.arrayBuffers, m.arrayBuffers / 1024);
  }
}, 100);

function report(): BenchWorkerReport {
  const mem = processMemoryKb('self');
  const ms = (ns: number): number => ns / 1e6;
  return {
    type: 'report',
    pid: process.pid,
    roles: config.roles,
    rssKb: mem.rssKb,
    hwmKb: mem.hwmKb,
    memoryPeakKb,
    sandboxIds: [...provider.ids],
    peaks,
    atSlotLimit: Object.fromEntries(Object.entries(atLimit).map(([k, v]) => [k, v / Math.max(1, samples)])),
    samples,
    eventLoopDelayMs: { p50: ms(loopDelay.percentile(50)), p99: ms(loopDelay.percentile(99)), max: ms(loopDelay.max) },
    spawn: spawnStats,
  };
}

process.on('message', (message: { type: string }) => {
  if (message.type === 'report') process.send?.(report());
  if (message.type === 'stop') {
    clearInterval(sampler);
    workers.shutdown();
    void done
      .then(async () => {
        await connection.close();
        await clientConnection.close();
      })
      .finally(() => process.exit(0));
  }
});
process.on('disconnect', () => {
  workers.shutdown();
});
process.send?.({ type: 'ready', pid: process.pid });
