/**
 * The activities every attempt calls on its sandbox's host (the host's own task queue, or local
 * activities of its worker when the attempt runs there: workflows/attempt/hostCalls.ts is the
 * workflow's side of the same list):
 *
 *   runTool, runTools     the tool calls a policy turn asked for, run in the sandbox. Each call is
 *                         recorded in the store before the workflow hears of it, so a retry runs only
 *                         the calls that have no record yet; with resume by replay the record keeps
 *                         the sandbox's state digest after the call.
 *   verifyAttempt         the verdict (in place beside the agent, or in a clean room). A verifier that
 *                         failed is attributed by a control run on the untouched start; the verdict
 *                         is recorded before the workflow hears of it.
 *   teardownSandbox       the sandbox's end; verifyThenTeardown, both in one call.
 *   watchHost             heartbeats beside an attempt that runs on the host (group.attemptOn 'host')
 *                         while the host lives.
 */
import { Context } from '@temporalio/activity';
import { ClassifiedError, failureName } from '../../shared/failures.js';
import type { SandboxHandle, SandboxStateDigest, TeardownReport } from '../../shared/sandbox.js';
import { activityLog } from '../activityLog.js';
import { policyName, toolName, type PolicyTurnRecord, type ToolTurnRecord } from '../../agent/conversation.js';
import { executeToolCall } from '../../agent/executeTool.js';
import { summarizeToolCall } from '../../agent/toolArguments.js';
import { attributeSandboxLoss, attributeVerifyFailure } from '../../verifier/attribution/attributeFailure.js';
import type { TeardownInput, ToolCallsStepInput, ToolCallsStepOutput, ToolStepInput, ToolStepOutput, VerifyInput, VerifyOutput, VerifyThenTeardownOutput } from '../contract.js';
import { taskEnvironment } from '../../images/taskEnvironment.js';
import { HEARTBEAT_EVERY_MS, withHeartbeats } from '../heartbeats.js';
import { sandboxSpecForTask } from '../../images/sandboxSpecForTask.js';
import { verifyCleanRoom, verifyInPlace } from '../../verifier/runVerifier.js';
import { taskOfGroup, type ActivityContext } from './activityContext.js';

// ---- a turn's tool calls ----

/** runTool: one tool call of a turn. Heartbeats also while it waits for an earlier run of the same call in this process. */
export function runTool(ctx: ActivityContext, input: ToolStepInput): Promise<ToolStepOutput> {
  return withHeartbeats(() => ctx.inFlight.run(`${input.trajectoryRef}/${toolName(input.attempt, input.turn, input.callIndex)}`, () => runOneToolOnce(ctx, input)));
}

async function runOneToolOnce(ctx: ActivityContext, input: ToolStepInput): Promise<ToolStepOutput> {
  const { deps, metrics } = ctx;
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
    await ctx.recordAttribution(input.trajectoryRef, input.attempt, `turn ${input.turn}`, attributed);
    if (attributed instanceof ClassifiedError && attributed.evidence.length > 0)
      activityLog(deps.logger, input).warn({ failure: failureName(attributed), evidence: attributed.evidence }, 'sandbox lost: attributed');
    throw attributed;
  });
  const durationMs = performance.now() - started;
  metrics.toolCall(outcome.name, durationMs);
  // What the call left in the sandbox, for a replay of it to be checked against (resume/).
  const digestStarted = performance.now();
  const state = input.recordState && deps.provider.stateDigest ? await stateAfterCall(ctx, input.handle, name) : undefined;
  const stateMs = performance.now() - digestStarted;
  activityLog(deps.logger, input).debug({ call: summarizeToolCall(call), exitCode: outcome.exitCode, timedOut: outcome.timedOut, durationMs: Math.round(durationMs) }, 'tool call');
  const record: ToolTurnRecord = {
    turn: input.turn,
    callIndex: input.callIndex,
    ...outcome,
    clock: { stepStartedAt, callStartedAt, callEndedAt: callStartedAt + durationMs },
    ...(state ? { state, stateMs } : {}),
  };
  await deps.store.put(input.trajectoryRef, name, record);
  return { name: outcome.name, summary: summarizeToolCall(call), exitCode: outcome.exitCode, malformed: outcome.malformed, timedOut: outcome.timedOut };
}

/** The sandbox's state digest; a sandbox gone is infra as for the call, another failure leaves the call without one (its replay is then checked by exit code). */
async function stateAfterCall({ deps }: ActivityContext, handle: SandboxHandle, name: string): Promise<SandboxStateDigest | undefined> {
  try {
    return await deps.provider.stateDigest?.(handle);
  } catch (err) {
    if (err instanceof ClassifiedError) throw err;
    deps.logger.warn({ sandbox: handle.id, call: name, error: String(err) }, 'could not digest the sandbox state after a call; its replay will be checked by exit code only');
    return undefined;
  }
}

/**
 * The tool calls one policy turn asked for, in their order, as one activity (one hand-off instead
 * of one per call). Each call is recorded in the store as runTool records it, so a retry after a
 * worker died mid-turn runs only the calls that have no record yet. Stops at the agent's budget.
 */
export async function runTools(ctx: ActivityContext, input: ToolCallsStepInput): Promise<ToolCallsStepOutput> {
  const started = performance.now();
  const calls: ToolStepOutput[] = [];
  for (const callIndex of input.callIndexes) {
    const remainingMs = input.remainingMs - (performance.now() - started);
    if (remainingMs <= 0) break;
    calls.push(await runTool(ctx, { ...input, callIndex, remainingMs }));
  }
  return { calls };
}

// ---- the verdict and the teardown ----

export async function verifyAttempt(ctx: ActivityContext, input: VerifyInput): Promise<VerifyOutput> {
  const { deps } = ctx;
  const task = taskOfGroup(ctx.tasks, input.group);
  const started = performance.now();
  const isKubernetes = deps.provider.name === 'kubernetes';
  const outcome = await withHeartbeats(async () => {
    const environment = await taskEnvironment(task, deps.provider.name);
    const options = environment.verify;
    try {
      return await (input.group.verifyMode === 'clean-room'
        ? verifyCleanRoom(
            deps.provider,
            input.handle,
            task,
            sandboxSpecForTask(
              task,
              { workflowId: `${input.trajectoryRef}/clean-room`, runId: '', attempt: input.attempt },
              {},
              isKubernetes,
              environment.image,
            ),
            options,
          )
        : verifyInPlace(deps.provider, input.handle, task, options));
    } catch (err) {
      // A verifier that crashed or timed out: the control on the untouched start says whose doing it was.
      const controlSpec = sandboxSpecForTask(task, { workflowId: `${input.trajectoryRef}/verifier-control`, runId: '', attempt: input.attempt }, {}, isKubernetes, environment.image);
      const attributed = await attributeVerifyFailure(err, task, ctx.controls, controlSpec, options);
      await ctx.recordAttribution(input.trajectoryRef, input.attempt, 'verify', attributed);
      if (attributed instanceof ClassifiedError && attributed.evidence.length > 0)
        activityLog(deps.logger, input).warn({ failure: failureName(attributed), evidence: attributed.evidence }, 'verifier failed: attributed');
      throw attributed;
    }
  });
  const verifyMs = performance.now() - started;
  await deps.store.put(input.trajectoryRef, `attempt-${String(input.attempt).padStart(2, '0')}/verify.json`, { ...outcome, verifyMs });
  activityLog(deps.logger, input).info({ reward: outcome.reward, mode: outcome.mode, verifyMs: Math.round(verifyMs) }, 'verified');
  return { reward: outcome.reward, metrics: outcome.metrics, mode: outcome.mode, verifyMs };
}

export async function teardownSandbox({ deps, countSandboxes }: ActivityContext, input: TeardownInput): Promise<TeardownReport & { teardownMs: number }> {
  const { handle } = input;
  const started = performance.now();
  // Heartbeats: a worker that dies mid-teardown is noticed within the heartbeat timeout and the
  // teardown retried on a live worker, not after its whole start-to-close timeout (2 minutes).
  const report = await withHeartbeats(() => deps.provider.teardown(handle));
  const teardownMs = performance.now() - started;
  activityLog(deps.logger, input).info({ sandbox: handle.id, teardownMs: Math.round(teardownMs) }, 'sandbox torn down');
  await countSandboxes();
  return { ...report, teardownMs };
}

/**
 * The verdict and then the teardown, in one activity on the sandbox's host: one server round trip
 * instead of two. A verify that fails tears nothing down (its retry needs the sandbox; the workflow's
 * teardown follows the last try), and a teardown that fails here is left to the workflow's.
 */
export async function verifyThenTeardown(ctx: ActivityContext, input: VerifyInput): Promise<VerifyThenTeardownOutput> {
  // A retry after the verdict was recorded (its worker died before the server heard back, perhaps
  // after the teardown) returns that verdict: the sandbox may be gone, the verdict is not.
  const recorded = await ctx.deps.store.get<VerifyOutput>(input.trajectoryRef, `attempt-${String(input.attempt).padStart(2, '0')}/verify.json`);
  const verdict = recorded ? { reward: recorded.reward, metrics: recorded.metrics, mode: recorded.mode, verifyMs: recorded.verifyMs } : await verifyAttempt(ctx, input);
  try {
    const { teardownMs } = await teardownSandbox(ctx, { handle: input.handle, trajectoryRef: input.trajectoryRef, attempt: input.attempt });
    return { ...verdict, teardown: { done: true, teardownMs } };
  } catch (err) {
    return { ...verdict, teardown: { done: false, error: err instanceof Error ? err.message : String(err) } };
  }
}

// ---- the host's liveness, beside an attempt that runs there ----

export interface WatchHostInput {
  /** The attempt workflow watched over (for logs and the Web UI). */
  attemptWorkflowId: string;
}

/** Never returns on its own: it ends when the rollout cancels it (or fails when its worker stops). */
export async function watchHost(_input: WatchHostInput): Promise<void> {
  const context = Context.current();
  context.heartbeat();
  const timer = setInterval(() => context.heartbeat(), HEARTBEAT_EVERY_MS);
  try {
    await context.cancelled;
  } finally {
    clearInterval(timer);
  }
}
