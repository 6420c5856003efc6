/**
 * The three workers one pipeline process runs, sharing one connection:
 *   main:   workflows (rolloutGroup, rollout) and sandbox provisioning
 *   host:   this machine's own queue, for everything that touches its sandboxes
 *           (tool calls, verify, teardown), so calls reach the host holding the sandbox
 *   policy: policy (LLM) calls, rate limited per second across all workers
 */
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, Worker, type NativeConnection, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Logger } from 'pino';
import { withClassifiedFailures } from '../activities/classifiedToApplicationFailure.js';
import { createActivities, type ActivityDeps } from '../activities/createActivities.js';
import { TASK_QUEUES, hostTaskQueue } from '../shared/names.js';

export const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export interface PipelineWorkerOptions extends ActivityDeps {
  connection: NativeConnection;
  namespace?: string;
  taskQueues?: { main: string; policy: string };
  /** Policy calls per second across every worker of the policy queue. */
  policyRatePerSecond?: number;
  maxConcurrentPolicyCalls?: number;
  maxConcurrentToolCalls?: number;
  maxConcurrentWorkflowTasks?: number;
  /** A prebuilt workflow bundle (tests build it once). */
  workflowBundle?: WorkflowBundleWithSourceMap;
  logger: Logger;
}

export interface PipelineWorkers {
  workers: Worker[];
  /** Runs all workers until shutdown() (or one of them fails). */
  run(): Promise<void>;
  shutdown(): void;
}

export async function bundlePipelineWorkflows(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} } });
}

export async function createPipelineWorkers(options: PipelineWorkerOptions): Promise<PipelineWorkers> {
  const queues = options.taskQueues ?? TASK_QUEUES;
  const activities = withClassifiedFailures(createActivities(options));
  const bundle = options.workflowBundle ?? (await bundlePipelineWorkflows());
  const common = { connection: options.connection, namespace: options.namespace ?? 'default', identity: options.workerIdentity };

  const main = await Worker.create({
    ...common,
    taskQueue: queues.main,
    workflowBundle: bundle,
    activities: { provisionSandbox: activities.provisionSandbox, resolveTask: activities.resolveTask, recordRollout: activities.recordRollout },
    maxConcurrentWorkflowTaskExecutions: options.maxConcurrentWorkflowTasks ?? 40,
    // Provisioning heartbeats reach the server every 2 s (not 80% of the heartbeat timeout), so a
    // provision the workflow stopped waiting for learns it in time to tear its sandbox down.
    maxHeartbeatThrottleInterval: '2 seconds',
  });
  const host = await Worker.create({
    ...common,
    taskQueue: hostTaskQueue(options.host),
    activities: { runTool: activities.runTool, verifyAttempt: activities.verifyAttempt, teardownSandbox: activities.teardownSandbox, reapSandboxes: activities.reapSandboxes },
    maxConcurrentActivityTaskExecutions: options.maxConcurrentToolCalls ?? 100,
  });
  const policy = await Worker.create({
    ...common,
    taskQueue: queues.policy,
    activities: { policyStep: activities.policyStep },
    maxConcurrentActivityTaskExecutions: options.maxConcurrentPolicyCalls ?? 64,
    ...(options.policyRatePerSecond ? { maxTaskQueueActivitiesPerSecond: options.policyRatePerSecond } : {}),
  });
  const workers = [main, host, policy];
  return {
    workers,
    run: async () => {
      await Promise.all(workers.map((w) => w.run()));
    },
    shutdown: () => {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    },
  };
}
