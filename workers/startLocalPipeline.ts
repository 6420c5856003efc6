/**
 * One process that is a whole pipeline worker on this machine: local
 * sandboxes, the configured trajectory store (files under the data directory
 * by default, or PostgreSQL), and the
 * three workers (main, host, policy). Used by `rollout worker` and by the
 * embedded mode of `rollout run`.
 */
import { hostname } from 'node:os';
import { Runtime } from '@temporalio/worker';
import { pipelineMetrics } from '../agent/pipelineMetrics.js';
import { temporalOwnerStatus } from '../activities/reaper/temporalOwnerStatus.js';
import { TASK_QUEUES } from '../shared/names.js';
import { ensureJanitorSchedule } from './janitorSchedule.js';
import { reapAtStart } from './reapAtStart.js';
import { openTemporalClient, openWorkerConnection, type TemporalSettings } from './temporalConnection.js';
import { openSandboxProvider } from '../sandboxes/openSandboxProvider.js';
import { openTrajectoryStore } from '../stores/openTrajectoryStore.js';
import type { TrajectoryStore } from '../stores/trajectoryStore.js';
import type { SandboxProvider } from '../shared/sandbox.js';
import { createLogger, installRuntime } from './logger.js';
import { createPipelineWorkers, type PipelineWorkers } from './pipelineWorkers.js';
import type { WorkerBuild } from './versioning/workerDeployment.js';

export interface LocalPipelineOptions {
  /** The Temporal server: address, namespace, TLS / API key (workers/temporalConnection.ts). */
  temporal: TemporalSettings;
  dataDir: string;
  policyRatePerSecond?: number;
  taskQueues?: { main: string; policy: string };
  /** Names this worker's sandbox host queue (default: the hostname); two workers on one machine that must not share sandboxes use different ids. */
  hostId?: string;
  /** host:port where Prometheus metrics are served (SDK + pipeline); none when absent. */
  metricsAddress?: string;
  /** The trajectory store setting (see openTrajectoryStore): fs by default, or a postgres:// URL. */
  store?: string;
  /** Where the workers' pino log lines go: this file (its folder made) instead of stdout. */
  logFile?: string;
  /**
   * How long stop() lets in-flight activities finish before cancelling them (graceMs), and before it
   * gives up on them (forceMs: an activity that ignores cancellation no longer holds the process).
   * Default: the SDK's (no grace, no limit).
   */
  stopWithin?: { graceMs: number; forceMs: number };
  /** The build this process runs: its workflows pinned to it (workers/versioning/workerDeployment.ts). */
  build?: WorkerBuild;
}

export interface LocalPipeline {
  workers: PipelineWorkers;
  store: TrajectoryStore;
  provider: SandboxProvider;
  done: Promise<void>;
  stop(): Promise<void>;
}

export async function startLocalPipeline(options: LocalPipelineOptions): Promise<LocalPipeline> {
  const logger = createLogger('rollout-worker', options.logFile);
  // The callers (rollout worker, rollout run --embedded) handle SIGINT/SIGTERM themselves and decide the order.
  installRuntime(logger, { shutdownSignals: [], ...(options.metricsAddress ? { metricsAddress: options.metricsAddress } : {}) });
  const connection = await openWorkerConnection(options.temporal);
  const { client, close: closeClient } = await openTemporalClient(options.temporal);
  const sandboxes = openSandboxProvider();
  const provider = sandboxes.provider;
  const store = await openTrajectoryStore(options.store, options.dataDir);
  const host = options.hostId ?? sandboxes.host;
  const ownerStatus = temporalOwnerStatus(client);
  await reapAtStart(provider, ownerStatus, logger);
  const workers = await createPipelineWorkers({
    connection,
    provider,
    store,
    host,
    // The machine (in Kubernetes: the pod) by name, and the sandbox host id when it differs: every pod
    // of a Deployment is pid 1 and shares the host id, so `${pid}@${host}` alone names none of them.
    workerIdentity: host === hostname() ? `${process.pid}@${host}` : `${process.pid}@${hostname()}/${host}`,
    logger,
    ownerStatus,
    namespace: options.temporal.namespace,
    metrics: pipelineMetrics(Runtime.instance().metricMeter),
    ...(options.taskQueues ? { taskQueues: options.taskQueues } : {}),
    ...(options.policyRatePerSecond ? { policyRatePerSecond: options.policyRatePerSecond } : {}),
    ...(options.build ? { build: options.build } : {}),
    ...(options.stopWithin ? { shutdownGraceTime: options.stopWithin.graceMs, shutdownForceTime: options.stopWithin.forceMs } : {}),
  });
  const done = workers.run();
  const janitor = await ensureJanitorSchedule(client, { host, mainQueue: options.taskQueues?.main ?? TASK_QUEUES.main });
  logger.info(
    {
      address: options.temporal.address,
      namespace: options.temporal.namespace,
      host,
      taskQueues: options.taskQueues ?? TASK_QUEUES,
      trajectories: store.locate(''),
      janitorSchedule: janitor,
      build: options.build ?? null,
      metrics: options.metricsAddress ? `http://${options.metricsAddress}/metrics` : null,
    },
    'pipeline workers running',
  );
  return {
    workers,
    store,
    provider,
    done,
    async stop() {
      workers.shutdown();
      await done.catch((err: unknown) => {
        // GracefulShutdownPeriodExpiredError after stopWithin.forceMs: an activity ignored its cancellation.
        logger.warn({ error: err instanceof Error ? err.message : String(err) }, 'workers stopped with activities still running');
      });
      // The pool's ready sandboxes go with the worker (the next start's reaper would find them otherwise).
      await provider.close?.().catch((err: unknown) => logger.warn({ error: err instanceof Error ? err.message : String(err) }, 'could not drain the sandbox pool; the next start reaps it'));
      await connection.close();
      await closeClient();
      await store.close();
    },
  };
}
