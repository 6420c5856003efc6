/**
 * policyStep: one policy turn. The conversation so far goes to the model; its answer is recorded in
 * the trajectory store before the workflow hears of it, so a retry returns the recorded answer
 * instead of asking the model again.
 */
import { policyLabel } from '../../shared/policyLabel.js';
import { TOOL_SCHEMAS } from '../../shared/tools.js';
import { loadConversation, policyName, type PolicyTurnRecord } from '../../agent/conversation.js';
import { parseToolCall, summarizeToolCall } from '../../agent/toolArguments.js';
import { activityLog } from '../activityLog.js';
import type { PolicyStepInput, PolicyStepOutput } from '../contract.js';
import { withHeartbeats } from '../heartbeats.js';
import { callPolicy } from '../../agent/meteredPolicyCall.js';
import { turnIntegrity, type TurnTokenStatus } from '../../policies/tokens/turnIntegrity.js';
import { turnTokensOf } from '../../policies/tokens/turnTokensOf.js';
import { loadSubmittedTask, type ActivityContext } from './activityContext.js';

/**
 * Heartbeats while the model answers: a policy worker that dies or is cut off mid-call is noticed
 * within the heartbeat timeout and the turn is asked again on another, not after start-to-close.
 * Heartbeats also while it waits for an earlier run of the same turn in this process.
 */
export function policyStep(ctx: ActivityContext, input: PolicyStepInput): Promise<PolicyStepOutput> {
  return withHeartbeats((signal) => ctx.inFlight.run(`${input.trajectoryRef}/${policyName(input.attempt, input.turn)}`, () => policyStepWork(ctx, input, signal)));
}

/** What the workflow needs of a recorded policy turn. */
function stepOutput(record: PolicyTurnRecord, tokens: TurnTokenStatus, reused: boolean): PolicyStepOutput {
  const calls = (record.assistant.tool_calls ?? []).map((c) => ({ name: c.function.name, summary: summarizeToolCall(c), malformed: !parseToolCall(c).ok }));
  return {
    calls,
    submitted: calls.length === 0 || calls.some((c) => c.name === 'submit' && !c.malformed),
    latencyMs: record.latencyMs,
    tokens,
    policyVersion: record.policyVersion,
    ...(reused ? { reused } : {}),
  };
}

/** One policy turn: the conversation so far to the model, its answer recorded in the store. */
async function policyStepWork(ctx: ActivityContext, input: PolicyStepInput, signal: AbortSignal | undefined): Promise<PolicyStepOutput> {
  const { deps, metrics } = ctx;
  const stepStartedAt = Date.now();
  const task = loadSubmittedTask(ctx.tasks, input.task);
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
    const again = turnIntegrity(
      recorded.turnTokens ?? (input.policy.kind === 'scripted' ? { reason: 'a scripted policy generates no tokens' } : undefined),
      previousTokens,
      input.turn === 0,
      recorded.promptProblem,
    );
    log.info({ model, policyVersion: recorded.policyVersion }, 'policy turn already recorded: its answer is returned, the model is not asked again');
    return stepOutput(recorded, again.status, true);
  }
  const { record, integrity } = await callPolicy({
    client: ctx.policyClient(input.policy),
    messages,
    tools: TOOL_SCHEMAS,
    task,
    rolloutIndex: input.rolloutIndex,
    attempt: input.attempt,
    turn: input.turn,
    sessionKey: input.trajectoryRef,
    policyVersion: input.policyVersion ?? 0,
    previousTokens,
    ...(input.policy.kind === 'scripted' ? { noTokensReason: 'a scripted policy generates no tokens' } : {}),
    ...(signal ? { signal } : {}),
    metrics,
    model,
    log,
    stepStartedAt,
  });
  if (integrity.status.status === 'broken') log.warn({ position: integrity.status.position, reason: integrity.status.reason }, 'token prefix break: this turn will not train');
  // Taken over (its heartbeat timed out, another worker is asking this turn again; or the rollout was
  // cancelled): this worker's answer is not the turn's, so it must not land in the trajectory.
  signal?.throwIfAborted();
  await deps.store.put(input.trajectoryRef, policyName(input.attempt, input.turn), record);
  const output = stepOutput(record, integrity.status, false);
  log.debug({ model, latencyMs: Math.round(record.latencyMs), calls: output.calls.map((c) => c.summary) }, 'policy step');
  return output;
}
