/**
 * All side effects of the pipeline, built by one factory from their
 * dependencies (a sandbox provider, a trajectory store, policy clients), so
 * tests inject real but small ones. Which worker registers which activity is
 * the worker's business (workers/startWorkers.ts): provisioning on the main
 * queue, tool calls / verify / teardown on the sandbox host's own queue,
 * policy steps on the rate-limited policy queue.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { ApplicationFailure } from '@temporalio/common';
import { ClassifiedError, failureName } from '../shared/failures.js';
import { hostTaskQueue } from '../shared/names.js';
import type { ExperimentRecord, ResolvedGroupInput, ResolvedPolicyConfig } from '../shared/pipeline.js';
import { policyLabel } from '../shared/policyLabel.js';
import { runHarness, type HarnessRunInput, type HarnessRunOutput } from './harness/runHarness.js';
import { withNetwork } from './tasks/taskNetwork.js';
import type { EnforcedLimits, SandboxHandle, SandboxProvider, SandboxStateDigest, TeardownReport } from '../shared/sandbox.js';
import type { LoadedTask, TaskRef, TaskRequest } from '../shared/task.js';
import { TOOL_SCHEMAS } from '../shared/tools.js';
import { loadConversation, metaName, policyName, SYSTEM_PROMPT, toolName, type AttemptMeta, type PolicyTurnRecord, type ToolTurnRecord } from './agent/conversation.js';
import { activityLog } from './activityLog.js';
import { attributeSandboxLoss, attributeVerifyFailure } from './attribution/attributeFailure.js';
import { VerifierControls } from './attribution/verifierControl.js';
import { executeToolCall } from './agent/executeTool.js';
import { withHeartbeats } from './heartbeats.js';
import { watchHost } from './watchHost.js';
import { InFlightSteps } from './inFlightSteps.js';
import { pipelineMetrics, type PipelineMetrics } from './pipelineMetrics.js';
import { parseToolCall, summarizeToolCall } from './agent/toolArguments.js';
import { pipelineVersion } from './pipelineVersion.js';
import { reapSandboxes, type OwnerStatus, type ReapReport } from './reaper/reapSandboxes.js';
import { restoreTurns, type RestoreTurnsInput, type RestoreTurnsOutput } from './resume/restoreTurns.js';
import { OpenAIPolicy } from './policies/openaiPolicy.js';
import { TokenLevelPolicy } from './policies/tokens/tokenLevelPolicy.js';
import { turnIntegrity, type TurnTokenStatus } from './policies/tokens/turnIntegrity.js';
import { turnTokensOf } from './policies/tokens/turnTokensOf.js';
import type { PolicyClient } from './policies/policyClient.js';
import { ScriptedPolicy } from './policies/scriptedPolicy.js';
import type { RolloutRecord, TrajectoryStore } from './store/trajectoryStore.js';
import { TaskCache } from './tasks/taskCache.js';
import { sandboxSpecForTask } from './tasks/sandboxSpecForTask.js';
import { taskEnvironment } from './environment/taskEnvironment.js';
import { verifyCleanRoom, verifyInPlace } from './verifier/runVerifier.js';

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

export const TOOL_INTERFACE_HASH = createHash('sha256').update(JSON.stringify(TOOL_SCHEMAS)).digest('hex');
export const RESET_RULES = 'fresh sandbox per attempt: new namespaces, overlay upper layer discarded, task files read-only lower layer';

export interface ProvisionInput {
  group: ResolvedGroupInput;
  workflowId: string;
  runId: string;
  index: number;
  attempt: number;
  trajectoryRef: string;
}

export interface ProvisionOutput {
  handle: SandboxHandle;
  hostQueue: string;
  enforcedLimits: EnforcedLimits;
  provisionMs: number;
  agentTimeoutSec: number;
  /** The task's [verifier].timeout_sec (absent from provisions recorded before it was returned). */
  verifierTimeoutSec?: number;
  workdir: string;
  experiment: ExperimentRecord;
}

export interface PolicyStepInput {
  policy: ResolvedPolicyConfig;
  task: TaskRef;
  trajectoryRef: string;
  rolloutIndex: number;
  attempt: number;
  turn: number;
  /** The policy version the endpoint serves now, recorded with the turn (absent from rollouts started before versions). */
  policyVersion?: number;
}

export interface PolicyStepOutput {
  calls: { name: string; summary: string; malformed: boolean }[];
  /** The policy called submit, or answered without any tool call. */
  submitted: boolean;
  latencyMs: number;
  /** The turn's token ids and the exact-prefix check, in short (the ids are in the store). */
  tokens?: TurnTokenStatus;
  /** The policy version the recorded answer was sampled under (absent from workers before it was returned). */
  policyVersion?: number;
  /** The answer was already recorded by an earlier try of this turn and is returned as it was. */
  reused?: boolean;
}

export interface ToolStepInput {
  handle: SandboxHandle;
  trajectoryRef: string;
  attempt: number;
  turn: number;
  callIndex: number;
  workdir: string;
  commandTimeoutSec: number;
  maxOutputBytes: number;
  remainingMs: number;
  /** Keep the digest of the sandbox's files after the call with its record (failurePolicy.resume 'replay'). */
  recordState?: boolean;
}

/** The tool calls of one turn (callIndexes into the policy's answer, in order) run as one activity. */
export interface ToolCallsStepInput extends Omit<ToolStepInput, 'callIndex'> {
  callIndexes: number[];
}

export interface ToolCallsStepOutput {
  /** One per call that ran, in order; fewer than asked when the agent's time budget ran out. */
  calls: ToolStepOutput[];
}

export interface ToolStepOutput {
  name: string;
  summary: string;
  exitCode: number | null;
  malformed: boolean;
  timedOut: boolean;
}

export interface VerifyInput {
  handle: SandboxHandle;
  group: ResolvedGroupInput;
  index: number;
  attempt: number;
  trajectoryRef: string;
}

export interface TeardownInput {
  handle: SandboxHandle;
  trajectoryRef: string;
  attempt: number;
}

export interface VerifyOutput {
  reward: number;
  metrics: Record<string, number>;
  mode: string;
  verifyMs: number;
}

/** verifyThenTeardown: the verdict, and the teardown that followed it (or why it did not happen: the workflow tears down then). */
export interface VerifyThenTeardownOutput extends VerifyOutput {
  teardown: { done: true; teardownMs: number } | { done: false; error: string };
}

function loadSubmittedTask(tasks: TaskCache, ref: TaskRef): LoadedTask {
  const task = tasks.load(ref.dir);
  if (task.version !== ref.version) {
    throw new ClassifiedError('task', 'invalid_spec', `${ref.dir}: the task changed since the batch was submitted (version ${ref.version.slice(0, 12)} → ${task.version.slice(0, 12)}). Fix: resubmit the batch, or restore the task files`);
  }
  return task;
}

/** The group's task as its sandboxes run it: with the batch's network when the batch set one. */
function taskOfGroup(tasks: TaskCache, group: ResolvedGroupInput): LoadedTask {
  return withNetwork(loadSubmittedTask(tasks, group.task), group.network, `the batch's network (rollout run --network ${group.network ?? ''})`);
}

/** The failure name of an error for metrics: ours (`infra/policy_unavailable`) or the error's own name. */
function failureLabel(err: unknown): string {
  if (err instanceof ClassifiedError) return failureName(err);
  if (err instanceof ApplicationFailure && err.type) return err.type;
  return err instanceof Error ? err.name : 'unknown';
}

export function createActivities(deps: ActivityDeps) {
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
  // A step asked for again while its first run still goes in this process waits for that run (activities/inFlightSteps.ts).
  const inFlight = new InFlightSteps();
  // Provisioning, every policy step and verification check the task's version; the cache spares them re-reading it.
  const tasks = new TaskCache();
  // Failure attribution's controls, per task version on this host (this worker serves one host).
  const controls = new VerifierControls(deps.provider, deps.host);
  /** Keeps what attribution decided, and why, in the trajectory; the failure goes on either way. */
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
      // A harness's calls go to its inference server through the capture endpoint (activities/harness/), which asks this same client.
      const inference = config.kind === 'harness' ? config.inference : config;
      return inference.tokens.mode === 'pipeline' ? new TokenLevelPolicy(inference) : new OpenAIPolicy(inference);
    });

  /** What the workflow needs of a recorded policy turn. */
  const stepOutput = (record: PolicyTurnRecord, tokens: TurnTokenStatus, reused: boolean): PolicyStepOutput => {
    const calls = (record.assistant.tool_calls ?? []).map((c) => ({ name: c.function.name, summary: summarizeToolCall(c), malformed: !parseToolCall(c).ok }));
    return { calls, submitted: calls.length === 0 || calls.some((c) => c.name === 'submit' && !c.malformed), latencyMs: record.latencyMs, tokens, policyVersion: record.policyVersion, ...(reused ? { reused } : {}) };
  };

  /** One policy turn: the conversation so far to the model, its answer recorded in the store. */
  const policyStepWork = async (input: PolicyStepInput, signal: AbortSignal | undefined): Promise<PolicyStepOutput> => {
    const stepStartedAt = Date.now();
    const task = loadSubmittedTask(tasks, input.task);
    const messages = await loadConversation(deps.store, input.trajectoryRef, input.attempt, input.turn);
    const model = policyLabel(input.policy);
    const log = activityLog(deps.logger, input);
    const previous = input.turn > 0 ? await deps.store.get<PolicyTurnRecord>(input.trajectoryRef, policyName(input.attempt, input.turn - 1)) : undefined;
    const previousTokens = previous ? turnTokensOf(previous) : undefined;
    // A retry of a turn whose answer is already in the trajectory (its worker recorded it, then died or was
    // cut off before the server heard back) returns that answer: the model is not asked twice, and the
    // turn keeps the one answer its record holds.
    const recorded = await deps.store.get<PolicyTurnRecord>(input.trajectoryRef, policyName(input.attempt, input.turn));
    if (recorded) {
      const again = turnIntegrity(recorded.turnTokens ?? (input.policy.kind === 'scripted' ? { reason: 'a scripted policy generates no tokens' } : undefined), previousTokens, input.turn === 0, recorded.promptProblem);
      log.info({ model, policyVersion: recorded.policyVersion }, 'policy turn already recorded: its answer is returned, the model is not asked again');
      return stepOutput(recorded, again.status, true);
    }
    const client = policyClient(input.policy);
    // Admission by the inference server's load: the wait is recorded on the turn, never in the model's time.
    const admitted = client.admit ? await client.admit(signal) : undefined;
    if (admitted?.admission.forced) log.warn({ model, waitedMs: admitted.admission.waitedMs, heldBy: admitted.admission.heldBy }, 'policy call sent without room on the server after the longest admission wait');
    if (admitted) {
      metrics.policyAdmission(model, admitted.admission.waitedMs);
      metrics.inferenceLoad(admitted.admission.server, admitted.admission.inFlight, admitted.admission.load);
    }
    const started = performance.now();
    const callStartedAt = Date.now();
    let response;
    try {
      response = await client.next({
        messages,
        tools: TOOL_SCHEMAS,
        task,
        rolloutIndex: input.rolloutIndex,
        attempt: input.attempt,
        turn: input.turn,
        previousTokens: previousTokens && 'promptIds' in previousTokens ? previousTokens : null,
        sessionKey: input.trajectoryRef,
        policyVersion: input.policyVersion ?? 0,
      });
    } catch (err) {
      const failure = failureLabel(err);
      metrics.policyError(model, failure);
      log.warn({ model, failure, error: err instanceof Error ? err.message : String(err) }, 'policy call failed');
      throw err;
    } finally {
      if (admitted) metrics.inferenceLoad(admitted.admission.server, admitted.release(), null);
    }
    const latencyMs = performance.now() - started;
    metrics.policyCall(model, latencyMs);
    const integrity = turnIntegrity(response.turnTokens ?? (input.policy.kind === 'scripted' ? { reason: 'a scripted policy generates no tokens' } : undefined), previousTokens, input.turn === 0, response.promptProblem);
    const clock = { stepStartedAt, callStartedAt, callEndedAt: callStartedAt + latencyMs };
    const record: PolicyTurnRecord = { turn: input.turn, latencyMs, clock, ...response, policyVersion: input.policyVersion ?? 0, prefixCheck: integrity.prefixCheck, ...(admitted ? { admission: admitted.admission } : {}) };
    if (integrity.status.status === 'broken') log.warn({ position: integrity.status.position, reason: integrity.status.reason }, 'token prefix break: this turn will not train');
    // Taken over (its heartbeat timed out, another worker is asking this turn again; or the rollout was
    // cancelled): this worker's answer is not the turn's, so it must not land in the trajectory.
    signal?.throwIfAborted();
    await deps.store.put(input.trajectoryRef, policyName(input.attempt, input.turn), record);
    const output = stepOutput(record, integrity.status, false);
    log.debug({ model, latencyMs: Math.round(latencyMs), calls: output.calls.map((c) => c.summary) }, 'policy step');
    return output;
  };

  // Heartbeats also while it waits for an earlier run of the same call in this process.
  const runOneTool = (input: ToolStepInput): Promise<ToolStepOutput> => withHeartbeats(() => inFlight.run(`${input.trajectoryRef}/${toolName(input.attempt, input.turn, input.callIndex)}`, () => runOneToolOnce(input)));
  const runOneToolOnce = async (input: ToolStepInput): Promise<ToolStepOutput> => {
    const stepStartedAt = Date.now();
    const name = toolName(input.attempt, input.turn, input.callIndex);
    // A retry after the result was already recorded must not run the command twice.
    const existing = await deps.store.get<ToolTurnRecord>(input.trajectoryRef, name);
    const policy = await deps.store.get<PolicyTurnRecord>(input.trajectoryRef, policyName(input.attempt, input.turn));
    const call = policy?.assistant.tool_calls?.[input.callIndex];
    if (!call) throw new ClassifiedError('infra', 'storage_error', `trajectory ${input.trajectoryRef}: no tool call ${input.callIndex} in turn ${input.turn}`);
    if (existing) return { name: existing.name, summary: summarizeToolCall(call), exitCode: existing.exitCode, malformed: existing.malformed, timedOut: existing.timedOut };
    const started = performance.now();
    const callStartedAt = Date.now();
    const outcome = await withHeartbeats((signal) =>
      executeToolCall(
        deps.provider,
        input.handle,
        call,
        { workdir: input.workdir, commandTimeoutSec: input.commandTimeoutSec, maxOutputBytes: input.maxOutputBytes, remainingMs: input.remainingMs },
        { ...(signal ? { signal } : {}), key: name },
      ),
    ).catch(async (err: unknown) => {
      // A sandbox gone after the agent's own command: how it died says whose doing it was.
      const attributed = await attributeSandboxLoss(err, deps.provider, input.handle, summarizeToolCall(call));
      await recordAttribution(input.trajectoryRef, input.attempt, `turn ${input.turn}`, attributed);
      if (attributed instanceof ClassifiedError && attributed.evidence.length > 0) activityLog(deps.logger, input).warn({ failure: failureName(attributed), evidence: attributed.evidence }, 'sandbox lost: attributed');
      throw attributed;
    });
    const durationMs = performance.now() - started;
    metrics.toolCall(outcome.name, durationMs);
    // What the call left in the sandbox, for a replay of it to be checked against (activities/resume/).
    const digestStarted = performance.now();
    const state = input.recordState && deps.provider.stateDigest ? await stateAfterCall(input.handle, name) : undefined;
    const stateMs = performance.now() - digestStarted;
    activityLog(deps.logger, input).debug({ call: summarizeToolCall(call), exitCode: outcome.exitCode, timedOut: outcome.timedOut, durationMs: Math.round(durationMs) }, 'tool call');
    const record: ToolTurnRecord = { turn: input.turn, callIndex: input.callIndex, ...outcome, clock: { stepStartedAt, callStartedAt, callEndedAt: callStartedAt + durationMs }, ...(state ? { state, stateMs } : {}) };
    await deps.store.put(input.trajectoryRef, name, record);
    return { name: outcome.name, summary: summarizeToolCall(call), exitCode: outcome.exitCode, malformed: outcome.malformed, timedOut: outcome.timedOut };
  };

  /** The sandbox's state digest; a sandbox gone is infra as for the call, another failure leaves the call without one (its replay is then checked by exit code). */
  const stateAfterCall = async (handle: SandboxHandle, name: string): Promise<SandboxStateDigest | undefined> => {
    try {
      return await deps.provider.stateDigest?.(handle);
    } catch (err) {
      if (err instanceof ClassifiedError) throw err;
      deps.logger.warn({ sandbox: handle.id, call: name, error: String(err) }, 'could not digest the sandbox state after a call; its replay will be checked by exit code only');
      return undefined;
    }
  };

  const verifyAttempt = async (input: VerifyInput): Promise<VerifyOutput> => {
    const task = taskOfGroup(tasks, input.group);
    const started = performance.now();
    const isKubernetes = deps.provider.name === 'kubernetes';
    const outcome = await withHeartbeats(async () => {
      const environment = await taskEnvironment(task, deps.provider.name);
      const options = environment.verify;
      try {
        return await (input.group.verifyMode === 'clean-room'
          ? verifyCleanRoom(deps.provider, input.handle, task, sandboxSpecForTask(task, { workflowId: `${input.trajectoryRef}/clean-room`, runId: '', attempt: input.attempt }, {}, isKubernetes, environment.image), options)
          : verifyInPlace(deps.provider, input.handle, task, options));
      } catch (err) {
        // A verifier that crashed or timed out: the control on the untouched start says whose doing it was.
        const controlSpec = sandboxSpecForTask(task, { workflowId: `${input.trajectoryRef}/verifier-control`, runId: '', attempt: input.attempt }, {}, isKubernetes, environment.image);
        const attributed = await attributeVerifyFailure(err, task, controls, controlSpec, options);
        await recordAttribution(input.trajectoryRef, input.attempt, 'verify', attributed);
        if (attributed instanceof ClassifiedError && attributed.evidence.length > 0) activityLog(deps.logger, input).warn({ failure: failureName(attributed), evidence: attributed.evidence }, 'verifier failed: attributed');
        throw attributed;
      }
    });
    const verifyMs = performance.now() - started;
    await deps.store.put(input.trajectoryRef, `attempt-${String(input.attempt).padStart(2, '0')}/verify.json`, { ...outcome, verifyMs });
    activityLog(deps.logger, input).info({ reward: outcome.reward, mode: outcome.mode, verifyMs: Math.round(verifyMs) }, 'verified');
    return { reward: outcome.reward, metrics: outcome.metrics, mode: outcome.mode, verifyMs };
  };

  const teardownSandbox = async (input: TeardownInput): Promise<TeardownReport & { teardownMs: number }> => {
    const { handle } = input;
    const started = performance.now();
    // Heartbeats: a worker that dies mid-teardown is noticed within the heartbeat timeout and the
    // teardown retried on a live worker, not after its whole start-to-close timeout (2 minutes).
    const report = await withHeartbeats(() => deps.provider.teardown(handle));
    const teardownMs = performance.now() - started;
    activityLog(deps.logger, input).info({ sandbox: handle.id, teardownMs: Math.round(teardownMs) }, 'sandbox torn down');
    await countSandboxes();
    return { ...report, teardownMs };
  };

  return {
    /** Pins a task named by its directory to its id and current version (content hash). */
    resolveTask: async (request: TaskRequest): Promise<TaskRef> => {
      const task = tasks.load(request.dir);
      if (request.id !== undefined && request.id !== task.id) {
        throw new ClassifiedError('task', 'invalid_spec', `${request.dir}: the task id is the directory name ${task.id}, not ${request.id}. Fix: drop task.id or rename the directory`);
      }
      if (request.version !== undefined && request.version !== task.version) {
        throw new ClassifiedError('task', 'invalid_spec', `${request.dir}: version ${request.version.slice(0, 12)} was requested, the files are ${task.version.slice(0, 12)}. Fix: request the current version or restore the files`);
      }
      return { id: task.id, dir: task.dir, version: task.version };
    },

    provisionSandbox: async (input: ProvisionInput): Promise<ProvisionOutput> => {
      const task = taskOfGroup(tasks, input.group);
      const started = performance.now();
      let identity = '';
      const { handle, enforcedLimits, image, abandoned } = await withHeartbeats(async (signal) => {
        // A Dockerfile task on the local provider: its image, built on first use (one build per host, shared).
        const environment = await taskEnvironment(task, deps.provider.name, (line) => activityLog(deps.logger, input).info(line));
        identity = environment.identity;
        const spec = sandboxSpecForTask(
          task,
          { workflowId: input.workflowId, runId: input.runId, attempt: input.attempt },
          { batch: input.group.batchId, rollout: String(input.index) },
          deps.provider.name === 'kubernetes',
          environment.image,
        );
        const made = await deps.provider.provision(spec);
        // The workflow gave up on this call (timed out or cancelled) while we provisioned: nobody will
        // use or tear down this sandbox, so remove it now instead of leaving it to the reaper.
        if (signal?.aborted) {
          await deps.provider.teardown(made.handle);
          return { ...made, abandoned: true };
        }
        return { ...made, abandoned: false };
      });
      if (abandoned) throw new ClassifiedError('infra', 'provision_timeout', `sandbox ${handle.id} was ready after the workflow stopped waiting for it; torn down`);
      const provisionMs = performance.now() - started;
      const meta: AttemptMeta = { system: SYSTEM_PROMPT, instruction: task.instruction, tools: TOOL_SCHEMAS, startedAt: new Date().toISOString() };
      try {
        await deps.store.put(input.trajectoryRef, metaName(input.attempt), meta);
      } catch (err) {
        await deps.provider.teardown(handle);
        throw err;
      }
      const agentTimeoutSec = input.group.limits.agentTimeoutSec ?? task.agentTimeoutSec;
      activityLog(deps.logger, input).info({ sandbox: handle.id, provisionMs: Math.round(provisionMs) }, 'sandbox provisioned');
      await countSandboxes();
      return {
        handle,
        hostQueue: hostTaskQueue(deps.host),
        enforcedLimits,
        provisionMs,
        agentTimeoutSec,
        verifierTimeoutSec: task.verifierTimeoutSec,
        workdir: handle.workdir,
        experiment: {
          taskId: task.id,
          taskVersion: task.version,
          taskDir: task.dir,
          // A provider that runs the task's image says which one, by digest: [environment].docker_image and what it resolved to.
          environmentIdentity: image ? `${identity}; image ${image.reference} = ${image.digest}` : identity,
          toolInterfaceHash: TOOL_INTERFACE_HASH,
          resetRules: RESET_RULES,
          verifierHash: task.verifierHash,
          verifyMode: input.group.verifyMode,
          limits: { ...input.group.limits, agentTimeoutSec },
          policy: input.group.policy,
          pipelineVersion: pipelineVersion(),
          workerIdentity: deps.workerIdentity,
          sandboxProvider: deps.provider.name,
          network: task.network,
          resume: input.group.failurePolicy.resume ?? 'restart',
        },
      };
    },

    // Heartbeats while the model answers: a policy worker that dies or is cut off mid-call is noticed
    // within the heartbeat timeout and the turn is asked again on another, not after start-to-close.
    // Heartbeats also while it waits for an earlier run of the same turn in this process.
    policyStep: (input: PolicyStepInput): Promise<PolicyStepOutput> => withHeartbeats((signal) => inFlight.run(`${input.trajectoryRef}/${policyName(input.attempt, input.turn)}`, () => policyStepWork(input, signal))),

    runTool: (input: ToolStepInput): Promise<ToolStepOutput> => runOneTool(input),

    /**
     * The harness policy's agent stage: a published harness runs on this host against a capture endpoint
     * for the attempt; its model calls are recorded as turns, its commands as tool calls (activities/harness/).
     */
    runHarness: async (input: HarnessRunInput): Promise<HarnessRunOutput> => {
      const task = taskOfGroup(tasks, input.group);
      try {
        return await runHarness({ provider: deps.provider, store: deps.store, logger: deps.logger, host: deps.host, client: policyClient(input.group.policy), task, metrics }, input);
      } catch (err) {
        await recordAttribution(input.trajectoryRef, input.attempt, 'harness', err);
        throw err;
      }
    },

    /**
     * The tool calls one policy turn asked for, in their order, as one activity (one hand-off instead
     * of one per call). Each call is recorded in the store as runTool records it, so a retry after a
     * worker died mid-turn runs only the calls that have no record yet. Stops at the agent's budget.
     */
    runTools: async (input: ToolCallsStepInput): Promise<ToolCallsStepOutput> => {
      const started = performance.now();
      const calls: ToolStepOutput[] = [];
      for (const callIndex of input.callIndexes) {
        const remainingMs = input.remainingMs - (performance.now() - started);
        if (remainingMs <= 0) break;
        calls.push(await runOneTool({ ...input, callIndex, remainingMs }));
      }
      return { calls };
    },

    verifyAttempt: (input: VerifyInput): Promise<VerifyOutput> => verifyAttempt(input),

    /**
     * Resume (failurePolicy.resume 'replay'): brings a fresh sandbox to where an earlier attempt's last
     * finished turn left its own, by replaying its tool calls, and takes those turns over into this
     * attempt (activities/resume/restoreTurns.ts). Heartbeats while it replays.
     */
    restoreTurns: (input: RestoreTurnsInput): Promise<RestoreTurnsOutput> =>
      withHeartbeats(async (signal) => {
        const out = await restoreTurns(deps.provider, deps.store, input, signal);
        const log = activityLog(deps.logger, { trajectoryRef: input.trajectoryRef, attempt: input.toAttempt });
        if (out.status === 'restored') log.info({ fromAttempt: input.fromAttempt, turns: out.prefix.turns, replayedCalls: out.prefix.replayedCalls, replayMs: Math.round(out.prefix.replayMs), drift: out.prefix.drift }, 'turns restored by replay');
        else if (out.status === 'diverged') log.warn({ divergence: out.divergence }, 'the replay diverged: the attempt starts at turn 0');
        return out;
      }),

    /**
     * The verdict and then the teardown, in one activity on the sandbox's host: one server round trip
     * instead of two. A verify that fails tears nothing down (its retry needs the sandbox; the workflow's
     * teardown follows the last try), and a teardown that fails here is left to the workflow's.
     */
    verifyThenTeardown: async (input: VerifyInput): Promise<VerifyThenTeardownOutput> => {
      // A retry after the verdict was recorded (its worker died before the server heard back, perhaps
      // after the teardown) returns that verdict: the sandbox may be gone, the verdict is not.
      const recorded = await deps.store.get<VerifyOutput>(input.trajectoryRef, `attempt-${String(input.attempt).padStart(2, '0')}/verify.json`);
      const verdict = recorded ? { reward: recorded.reward, metrics: recorded.metrics, mode: recorded.mode, verifyMs: recorded.verifyMs } : await verifyAttempt(input);
      try {
        const { teardownMs } = await teardownSandbox({ handle: input.handle, trajectoryRef: input.trajectoryRef, attempt: input.attempt });
        return { ...verdict, teardown: { done: true, teardownMs } };
      } catch (err) {
        return { ...verdict, teardown: { done: false, error: err instanceof Error ? err.message : String(err) } };
      }
    },

    /** Keeps the finished rollout (outcome, reward, experiment record) in the store, queryable by batch, task and outcome. */
    recordRollout: async (record: RolloutRecord): Promise<void> => {
      await deps.store.putRollout(record);
    },

    reapSandboxes: async (options: { dryRun: boolean }): Promise<ReapReport> => {
      // Heartbeats: the janitor's pass on a worker that dies is noticed within the heartbeat timeout.
      const report = await withHeartbeats(() => reapSandboxes(deps.provider, deps.ownerStatus, { dryRun: options.dryRun }));
      await countSandboxes();
      if (report.reaped.length > 0 || report.errors.length > 0 || report.strays.length > 0) deps.logger.info({ reaped: report.reaped, errors: report.errors, strays: report.strays, dryRun: report.dryRun }, 'reaper pass');
      return report;
    },

    teardownSandbox: (input: TeardownInput): Promise<TeardownReport & { teardownMs: number }> => teardownSandbox(input),

    watchHost,
  };
}

export type PipelineActivities = ReturnType<typeof createActivities>;
