/**
 * runTool and runTools: the tool calls a policy turn asked for, run in the sandbox. Each call is
 * recorded in the store before the workflow hears of it, so a retry runs only the calls that have no
 * record yet; with resume by replay the record keeps the sandbox's state digest after the call.
 */
import { ClassifiedError, failureName } from '../../shared/failures.js';
import type { SandboxHandle, SandboxStateDigest } from '../../shared/sandbox.js';
import { policyName, toolName, type PolicyTurnRecord, type ToolTurnRecord } from '../../agent/conversation.js';
import { executeToolCall } from '../../agent/executeTool.js';
import { summarizeToolCall } from '../../agent/toolArguments.js';
import { activityLog } from '../activityLog.js';
import { attributeSandboxLoss } from '../../verifier/attribution/attributeFailure.js';
import type { ToolCallsStepInput, ToolCallsStepOutput, ToolStepInput, ToolStepOutput } from '../contract.js';
import { withHeartbeats } from '../heartbeats.js';
import type { ActivityContext } from './activityContext.js';

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
    if (attributed instanceof ClassifiedError && attributed.evidence.length > 0) activityLog(deps.logger, input).warn({ failure: failureName(attributed), evidence: attributed.evidence }, 'sandbox lost: attributed');
    throw attributed;
  });
  const durationMs = performance.now() - started;
  metrics.toolCall(outcome.name, durationMs);
  // What the call left in the sandbox, for a replay of it to be checked against (resume/).
  const digestStarted = performance.now();
  const state = input.recordState && deps.provider.stateDigest ? await stateAfterCall(ctx, input.handle, name) : undefined;
  const stateMs = performance.now() - digestStarted;
  activityLog(deps.logger, input).debug({ call: summarizeToolCall(call), exitCode: outcome.exitCode, timedOut: outcome.timedOut, durationMs: Math.round(durationMs) }, 'tool call');
  const record: ToolTurnRecord = { turn: input.turn, callIndex: input.callIndex, ...outcome, clock: { stepStartedAt, callStartedAt, callEndedAt: callStartedAt + durationMs }, ...(state ? { state, stateMs } : {}) };
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
