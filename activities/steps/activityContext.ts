/**
 * What every activity of a worker shares: its dependencies (a sandbox provider, a trajectory store,
 * policy clients, the reaper's view of Temporal) and the state they keep per worker process (steps in
 * flight, the task cache, attribution's controls, metrics). Built once by createActivities.ts.
 */
import type { Logger } from 'pino';
import { ClassifiedError, failureName } from '../../shared/failures.js';
import type { ResolvedGroupInput, ResolvedPolicyConfig } from '../../shared/pipeline.js';
import type { SandboxProvider } from '../../shared/sandbox.js';
import type { LoadedTask, TaskRef } from '../../shared/task.js';
import { VerifierControls } from '../../verifier/attribution/verifierControl.js';
import { InFlightSteps } from '../inFlightSteps.js';
import { pipelineMetrics, type PipelineMetrics } from '../../agent/pipelineMetrics.js';
import { OpenAIPolicy } from '../../policies/openaiPolicy.js';
import type { PolicyClient } from '../../policies/policyClient.js';
import { ScriptedPolicy } from '../../policies/scriptedPolicy.js';
import { TokenLevelPolicy } from '../../policies/tokens/tokenLevelPolicy.js';
import type { OwnerStatus } from '../../sandboxes/reaper/reapSandboxes.js';
import type { TrajectoryStore } from '../../stores/trajectoryStore.js';
import { TaskCache } from '../../tasks/taskCache.js';
import { withNetwork } from '../../tasks/taskNetwork.js';

export interface ActivityDeps {
  provider: SandboxProvider;
  store: TrajectoryStore;
  /** The machine this worker runs on; its sandboxes are reached through hostTaskQueue(host). */
  host: string;
  workerIdentity: string;
  logger: Logger;
  /** Builds the client for a policy config; tests may wrap it (fault injection at the edge). */
  policyClient?: (config: ResolvedPolicyConfig) => PolicyClient;
  /** Whether a sandbox's owning workflow run is still open (the reaper asks Temporal). */
  ownerStatus: (workflowId: string, runId: string) => Promise<OwnerStatus>;
  /** Where policy latency, tool call durations and sandboxes alive are recorded (no-op when absent). */
  metrics?: PipelineMetrics;
}

export interface ActivityContext {
  deps: ActivityDeps;
  metrics: PipelineMetrics;
  /** A step asked for again while its first run still goes in this process waits for that run (activities/inFlightSteps.ts). */
  inFlight: InFlightSteps;
  /** Provisioning, every policy step and verification check the task's version; the cache spares them re-reading it. */
  tasks: TaskCache;
  /** Failure attribution's controls, per task version on this host (this worker serves one host). */
  controls: VerifierControls;
  policyClient: (config: ResolvedPolicyConfig) => PolicyClient;
  /** Keeps what attribution decided, and why, in the trajectory; the failure goes on either way. */
  recordAttribution: (trajectoryRef: string, attempt: number, stage: string, err: unknown) => Promise<void>;
  /** Updates the sandboxes-alive metric. */
  countSandboxes: () => Promise<void>;
}

export function createActivityContext(deps: ActivityDeps): ActivityContext {
  const metrics = deps.metrics ?? pipelineMetrics();
  const countSandboxes = async (): Promise<void> => {
    try {
      // count() when the provider has it: list() reads every record, which made each provision and
      // teardown cost O(sandboxes alive) on the worker's event loop (quadratic at 1,000 at once).
      metrics.sandboxesAlive(deps.provider.name, deps.provider.count ? await deps.provider.count() : (await deps.provider.list()).length);
    } catch (err) {
      deps.logger.warn({ error: String(err) }, 'cannot count sandboxes for the sandboxes-alive metric');
    }
  };
  const recordAttribution = async (trajectoryRef: string, attempt: number, stage: string, err: unknown): Promise<void> => {
    if (!(err instanceof ClassifiedError) || err.evidence.length === 0) return;
    const record = { stage, failure: failureName(err), message: err.message, evidence: err.evidence, at: new Date().toISOString() };
    await deps.store.put(trajectoryRef, `attempt-${String(attempt).padStart(2, '0')}/attribution.json`, record).catch((e: unknown) => {
      deps.logger.warn({ trajectoryRef, error: String(e) }, 'could not keep the attribution in the trajectory');
    });
  };
  const policyClient =
    deps.policyClient ??
    ((config: ResolvedPolicyConfig): PolicyClient => {
      if (config.kind === 'scripted') return new ScriptedPolicy(config.script);
      // A harness's calls go to its inference server through the capture endpoint (harnesses/), which asks this same client.
      const inference = config.kind === 'harness' ? config.inference : config;
      return inference.tokens.mode === 'pipeline' ? new TokenLevelPolicy(inference) : new OpenAIPolicy(inference);
    });
  return { deps, metrics, inFlight: new InFlightSteps(), tasks: new TaskCache(), controls: new VerifierControls(deps.provider, deps.host), policyClient, recordAttribution, countSandboxes };
}

/** The task a step was submitted with, refused when its files changed since the batch was submitted. */
export function loadSubmittedTask(tasks: TaskCache, ref: TaskRef): LoadedTask {
  const task = tasks.load(ref.dir);
  if (task.version !== ref.version) {
    throw new ClassifiedError(
      'task',
      'invalid_spec',
      `${ref.dir}: the task changed since the batch was submitted (version ${ref.version.slice(0, 12)} → ${task.version.slice(0, 12)}). Fix: resubmit the batch, or restore the task files`,
    );
  }
  return task;
}

/** The group's task as its sandboxes run it: with the batch's network when the batch set one. */
export function taskOfGroup(tasks: TaskCache, group: ResolvedGroupInput): LoadedTask {
  return withNetwork(loadSubmittedTask(tasks, group.task), group.network, `the batch's network (rollout run --network ${group.network ?? ''})`);
}
