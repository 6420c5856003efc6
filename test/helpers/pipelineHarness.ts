/**
 * A whole pipeline in the test process: real workers (main, host, policy) on
 * the dev server `npm test` started, a real local sandbox provider and a
 * filesystem trajectory store in a temp dir, and task queues no other test
 * file uses.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import type { NativeConnection, WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { GroupResult, ResolvedPolicyConfig } from '../../shared/pipeline.js';
import { submitBatch, type SubmitBatchOptions } from '../../client/submitBatch.js';
import type { SandboxProvider } from '../../shared/sandbox.js';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { FsTrajectoryStore } from '../../stores/fsTrajectoryStore.js';
import type { TrajectoryStore } from '../../stores/trajectoryStore.js';
import type { PolicyClient } from '../../policies/policyClient.js';
import { temporalOwnerStatus } from '../../activities/reaper/temporalOwnerStatus.js';
import { createLogger } from '../../workers/logger.js';
import { bundlePipelineWorkflows, createPipelineWorkers, type PipelineWorkers } from '../../workers/pipelineWorkers.js';
import { connectClient, connectWorker, uniqueTaskQueue } from './temporal.js';

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;

export interface Harness {
  client: Client;
  provider: LocalSandboxProvider;
  store: FsTrajectoryStore;
  taskQueues: { main: string; policy: string };
  host: string;
  scratch: string;
  /** Starts workers (again, after stopWorkers) with an optional provider or policy wrapper. */
  startWorkers(overrides?: { provider?: SandboxProvider; policyClient?: (config: ResolvedPolicyConfig) => PolicyClient; store?: TrajectoryStore }): Promise<void>;
  stopWorkers(): Promise<void>;
  close(): Promise<void>;
}

export async function startHarness(name: string, options: { taskQueues?: { main: string; policy: string } } = {}): Promise<Harness> {
  bundle ??= bundlePipelineWorkflows();
  const scratch = mkdtempSync(join(tmpdir(), `pipeline-${name}-`));
  const provider = new LocalSandboxProvider({ stateRoot: join(scratch, 'sandboxes') });
  const store = new FsTrajectoryStore(join(scratch, 'trajectories'));
  const { client, close: closeClient } = await connectClient();
  const connection: NativeConnection = await connectWorker();
  const base = uniqueTaskQueue(name);
  const taskQueues = options.taskQueues ?? { main: `${base}-main`, policy: `${base}-policy` };
  const host = `${hostname()}-${base}`;
  const logger = createLogger(`test-${name}`);
  logger.level = process.env.LOG_LEVEL ?? 'warn';
  let running: { workers: PipelineWorkers; done: Promise<void> } | undefined;

  const harness: Harness = {
    client,
    provider,
    store,
    taskQueues,
    host,
    scratch,
    async startWorkers(overrides = {}) {
      const workers = await createPipelineWorkers({
        connection,
        taskQueues,
        provider: overrides.provider ?? provider,
        store: overrides.store ?? store,
        host,
        workerIdentity: `test-worker@${host}`,
        logger,
        workflowBundle: await bundle!,
        ownerStatus: temporalOwnerStatus(client),
        ...(overrides.policyClient ? { policyClient: overrides.policyClient } : {}),
      });
      running = { workers, done: workers.run() };
    },
    async stopWorkers() {
      if (!running) return;
      running.workers.shutdown();
      await running.done;
      running = undefined;
    },
    async close() {
      await harness.stopWorkers();
      for (const record of await provider.list()) await provider.teardown(record.id);
      await connection.close();
      await closeClient();
      rmSync(scratch, { recursive: true, force: true });
    },
  };
  return harness;
}

let groupSeq = 0;

/** Submits a batch of exactly one group to the harness's workers and waits for its result. */
export async function runOneGroup(h: Harness, batchPrefix: string, options: Omit<SubmitBatchOptions, 'batchId' | 'taskQueues'>): Promise<GroupResult> {
  const batch = await submitBatch(h.client, { batchId: `${batchPrefix}-${Date.now()}-${groupSeq++}`, taskQueues: h.taskQueues, ...options });
  const results: GroupResult[] = [];
  for await (const r of batch.results()) results.push(r);
  if (results.length !== 1 || !results[0]) throw new Error(`batch ${batch.batchId}: expected one group result, got ${results.length}`);
  return results[0];
}
