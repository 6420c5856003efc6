/**
 * The three workers one pipeline process runs, sharing one connection:
 *   main:   workflows (rolloutGroup, rollout) and sandbox provisioning
 *   host:   this machine's own queue, for everything that touches its sandboxes
 *           (tool calls, verify, teardown), so calls reach the host holding the sandbox;
 *           and the attempt workflows of groups that run attempts on their host
 *   policy: policy (LLM) calls, rate limited per second across all workers
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, Worker, type NativeConnection, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Logger } from 'pino';
import { withClassifiedFailures } from '../activities/classifiedToApplicationFailure.js';
import { createActivities, type ActivityDeps } from '../activities/createActivities.js';
import { TASK_QUEUES, hostTaskQueue, hostWatchQueue } from '../shared/names.js';
import { rolloutCacheDir } from '../shared/cacheDir.js';
import { cachedWorkflowBundle } from './workflowBundleCache.js';
import { pinnedDeployment, unversionedDeployment, type WorkerBuild } from './versioning/workerDeployment.js';

export const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));
const repoPath = (p: string): string => fileURLToPath(new URL(`../${p}`, import.meta.url));

/**
 * What a process does: run workflows (the main queue's workflow tasks),
 * provision sandboxes (the main queue's activities), serve this host's queue
 * (tool calls, verify, teardown), call the policy.
 */
export type WorkerRole = 'workflows' | 'provision' | 'host' | 'policy';
export const WORKER_ROLES: readonly WorkerRole[] = ['workflows', 'provision', 'host', 'policy'];

/** Slots of each kind of work when the options leave them unset (npm run bench measures them: docs/benchmarks.md). */
export const DEFAULT_SLOTS = {
  workflowTasks: 40,
  provisions: 100,
  toolCalls: 100,
  /**
   * A policy call only waits on HTTP, so a slot is cheap; 64 capped how many rollouts could wait on
   * inference at once (100 rollouts at 2 s per turn queued policy calls). Protect an inference server
   * with policyRatePerSecond, not with this.
   */
  policyCalls: 1000,
  /**
   * Attempts running on this host at once (group.attemptOn 'host'): each holds a workflow task slot,
   * a cache entry and a host-watch activity slot of the host's worker while it runs its local
   * activities. Past it, provisioned attempts wait for the host's worker.
   */
  attemptsOnHost: 200,
  /**
   * Host watches at once (one per provisioned attempt of a group with attemptOn 'host', including
   * attempts waiting for an attempt slot): each is a 2 s heartbeat timer, so the bound is loose.
   */
  hostWatches: 10_000,
} as const;

export interface PipelineWorkerOptions extends ActivityDeps {
  /**
   * Which roles this process takes (default all). Sandboxes are host-level
   * (registry on disk, JSON handles), so processes of one host can share
   * them: e.g. workflows in one process and everything that starts sandbox
   * commands (provision, host) in another, whose fork() stays cheap because
   * it does not hold the workflow cache.
   */
  roles?: readonly WorkerRole[];
  connection: NativeConnection;
  namespace?: string;
  taskQueues?: { main: string; policy: string };
  /** Policy calls per second across every worker of the policy queue. */
  policyRatePerSecond?: number;
  maxConcurrentPolicyCalls?: number;
  maxConcurrentToolCalls?: number;
  /** Attempts running on this host at once (group.attemptOn 'host'; default DEFAULT_SLOTS.attemptsOnHost). */
  maxConcurrentAttemptsOnHost?: number;
  maxConcurrentWorkflowTasks?: number;
  /** Sandbox provisions at once on the main worker (its activity slots). */
  maxConcurrentProvisions?: number;
  /** Workflows the main worker keeps in its cache (default: the SDK's, from the heap size). */
  maxCachedWorkflows?: number;
  /** Workflow task pollers of the main worker (default: the SDK's, min(10, workflow task slots)). */
  workflowTaskPollers?: number;
  /** Activity task pollers of each worker (default: the SDK's, min(10, that worker's slots)). */
  activityTaskPollers?: number;
  /** Time in-flight tasks get after shutdown() before their activities are cancelled (ms; SDK default 0). */
  shutdownGraceTime?: number;
  /** Time after which shutdown stops waiting for activities that ignore cancellation (ms; SDK default: no limit). */
  shutdownForceTime?: number;
  /** The build this process runs (Worker Versioning: workers/versioning/workerDeployment.ts); unversioned without it. */
  build?: WorkerBuild;
  /** A prebuilt workflow bundle (tests build it once). */
  workflowBundle?: WorkflowBundleWithSourceMap;
  logger: Logger;
}

export interface PipelineWorkers {
  /** The workers this process runs, in the order main, host, host watch, policy. */
  workers: Worker[];
  /** main: workflows and/or provisioning on the main queue; host: this host's queue; hostWatch: its watch queue; policy: the policy queue. */
  byQueue: { main?: Worker; host?: Worker; hostWatch?: Worker; policy?: Worker };
  /** Runs all workers until shutdown() (or one of them fails). */
  run(): Promise<void>;
  shutdown(): void;
}

/**
 * The pipeline's workflow bundle: from the cache outside the repository when one of the same
 * content was built before (workers/workflowBundleCache.ts), else bundled (3.0 s wall, 2.7 s CPU on this 2-core machine) and stored.
 */
export async function bundlePipelineWorkflows(options: { cacheDir?: string } = {}): Promise<WorkflowBundleWithSourceMap> {
  const cached = await cachedWorkflowBundle({
    workflowsPath: WORKFLOWS_PATH,
    // Workflow code imports only workflows/ and shared/ (lint keeps Node built-ins and activities out of it).
    sourceDirs: [repoPath('workflows'), repoPath('shared')],
    extraInputs: [repoPath('package-lock.json'), repoPath('tsconfig.json')],
    buildOptions: { bundler: 'bundleWorkflowCode', defaults: true },
    cacheDir: options.cacheDir ?? join(rolloutCacheDir(), 'workflow-bundles'),
    build: () => bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} } }),
  });
  return cached.bundle;
}

export async function createPipelineWorkers(options: PipelineWorkerOptions): Promise<PipelineWorkers> {
  const queues = options.taskQueues ?? TASK_QUEUES;
  const activities = withClassifiedFailures(createActivities(options));
  const common = {
    connection: options.connection,
    namespace: options.namespace ?? 'default',
    identity: options.workerIdentity,
    ...(options.shutdownGraceTime !== undefined ? { shutdownGraceTime: options.shutdownGraceTime } : {}),
    ...(options.shutdownForceTime !== undefined ? { shutdownForceTime: options.shutdownForceTime } : {}),
  };
  const activityPolls = (slots: number) => (options.activityTaskPollers ? { maxConcurrentActivityTaskPolls: Math.min(options.activityTaskPollers, slots) } : {});
  const workflowSlots = options.maxConcurrentWorkflowTasks ?? DEFAULT_SLOTS.workflowTasks;
  const provisionSlots = options.maxConcurrentProvisions ?? DEFAULT_SLOTS.provisions;
  const toolSlots = options.maxConcurrentToolCalls ?? DEFAULT_SLOTS.toolCalls;
  const policySlots = options.maxConcurrentPolicyCalls ?? DEFAULT_SLOTS.policyCalls;
  const attemptSlots = options.maxConcurrentAttemptsOnHost ?? DEFAULT_SLOTS.attemptsOnHost;

  const roles = new Set(options.roles ?? WORKER_ROLES);
  const byQueue: PipelineWorkers['byQueue'] = {};
  if (roles.has('workflows') || roles.has('provision')) {
    byQueue.main = await Worker.create({
      ...common,
      taskQueue: queues.main,
      ...(options.build ? { workerDeploymentOptions: pinnedDeployment(options.build) } : {}),
      ...(roles.has('workflows')
        ? {
            workflowBundle: options.workflowBundle ?? (await bundlePipelineWorkflows()),
            maxConcurrentWorkflowTaskExecutions: workflowSlots,
            ...(options.workflowTaskPollers ? { maxConcurrentWorkflowTaskPolls: Math.min(options.workflowTaskPollers, workflowSlots) } : {}),
            ...(options.maxCachedWorkflows !== undefined ? { maxCachedWorkflows: options.maxCachedWorkflows } : {}),
          }
        : {}),
      // Local activities of the rollout workflow run here: the policy call of a group with policyCalls
      // 'local', and the record of a finished rollout.
      ...(roles.has('workflows')
        ? {
            activities: { policyStep: activities.policyStep, recordRollout: activities.recordRollout },
            ...(roles.has('provision') ? {} : { enableNonLocalActivities: false }),
          }
        : {}),
      ...(roles.has('provision')
        ? {
            activities: {
              provisionSandbox: activities.provisionSandbox,
              resolveTask: activities.resolveTask,
              recordRollout: activities.recordRollout,
              ...(roles.has('workflows') ? { policyStep: activities.policyStep } : {}),
            },
            maxConcurrentActivityTaskExecutions: provisionSlots,
            ...activityPolls(provisionSlots),
            // Provisioning heartbeats reach the server every 2 s (not 80% of the heartbeat timeout), so a
            // provision the workflow stopped waiting for learns it in time to tear its sandbox down.
            maxHeartbeatThrottleInterval: '2 seconds',
          }
        : {}),
    });
  }
  if (roles.has('host')) {
    byQueue.host = await Worker.create({
      ...common,
      taskQueue: hostTaskQueue(options.host),
      ...(options.build ? { workerDeploymentOptions: unversionedDeployment(options.build) } : {}),
      // The attempt workflows of groups with attemptOn 'host' run here too (unversioned: any build serves
      // its own host); their policy calls, tool calls, verdicts and teardowns are local activities.
      workflowBundle: options.workflowBundle ?? (await bundlePipelineWorkflows()),
      maxConcurrentWorkflowTaskExecutions: attemptSlots,
      maxCachedWorkflows: attemptSlots,
      // An attempt runs one local activity at a time (a policy call, a turn's tools, the verdict).
      maxConcurrentLocalActivityExecutions: attemptSlots,
      activities: {
        runTool: activities.runTool,
        runTools: activities.runTools,
        verifyAttempt: activities.verifyAttempt,
        verifyThenTeardown: activities.verifyThenTeardown,
        teardownSandbox: activities.teardownSandbox,
        restoreTurns: activities.restoreTurns,
        runHarness: activities.runHarness,
        reapSandboxes: activities.reapSandboxes,
        policyStep: activities.policyStep,
      },
      maxConcurrentActivityTaskExecutions: toolSlots,
      ...activityPolls(toolSlots),
    });
    byQueue.hostWatch = await Worker.create({
      ...common,
      taskQueue: hostWatchQueue(hostTaskQueue(options.host)),
      ...(options.build ? { workerDeploymentOptions: unversionedDeployment(options.build) } : {}),
      activities: { watchHost: activities.watchHost },
      maxConcurrentActivityTaskExecutions: DEFAULT_SLOTS.hostWatches,
      maxConcurrentActivityTaskPolls: 2,
    });
  }
  if (roles.has('policy')) {
    byQueue.policy = await Worker.create({
      ...common,
      taskQueue: queues.policy,
      ...(options.build ? { workerDeploymentOptions: unversionedDeployment(options.build) } : {}),
      activities: { policyStep: activities.policyStep },
      maxConcurrentActivityTaskExecutions: policySlots,
      ...activityPolls(policySlots),
      ...(options.policyRatePerSecond ? { maxTaskQueueActivitiesPerSecond: options.policyRatePerSecond } : {}),
    });
  }
  const workers = [byQueue.main, byQueue.host, byQueue.hostWatch, byQueue.policy].filter((w): w is Worker => w !== undefined);
  return {
    workers,
    byQueue,
    run: async () => {
      await Promise.all(workers.map((w) => w.run()));
    },
    shutdown: () => {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    },
  };
}
