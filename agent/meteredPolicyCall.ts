/**
 * One call of the policy, made the one way every caller makes it (the agent loop's policy step and
 * a harness's captured call): admission by the inference server's load, the call, its metrics
 * (admission wait, server load, latency, errors), the turn's token integrity, and the turn's record
 * ready for the trajectory store. The caller stores the record; the client's errors are thrown as
 * they came, after they were counted.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { MissingTokens, TurnTokens } from '../shared/tokens.js';
import type { PolicyTurnRecord } from './conversation.js';
import type { PipelineMetrics } from './pipelineMetrics.js';
import type { PolicyClient, PolicyRequest, PolicyResponse } from '../policies/policyClient.js';
import { turnIntegrity } from '../policies/tokens/turnIntegrity.js';

/** The request as the client takes it, with the previous turn's tokens as the rollout holds them. */
export interface PolicyCall extends Omit<PolicyRequest, 'previousTokens' | 'sessionKey' | 'policyVersion'> {
  client: PolicyClient;
  /** The rollout's trajectory: the client keeps one server session (its KV cache) per rollout. */
  sessionKey: string;
  policyVersion: number;
  /** The previous turn's tokens: the prompt of this one must extend them. */
  previousTokens: TurnTokens | MissingTokens | undefined;
  /** Why the turn has no tokens when the client returns none on purpose (a scripted policy generates none). */
  noTokensReason?: string;
  signal?: AbortSignal;
  metrics: PipelineMetrics;
  /** The name the metrics and logs carry (policyLabel). */
  model: string;
  log: Pick<Logger, 'warn'>;
  /** When the step making the call started, for the record's clock (default: now). */
  stepStartedAt?: number;
}

export interface PolicyCallResult {
  record: PolicyTurnRecord;
  integrity: ReturnType<typeof turnIntegrity>;
}

export async function callPolicy(c: PolicyCall): Promise<PolicyCallResult> {
  const stepStartedAt = c.stepStartedAt ?? Date.now();
  // Admission by the inference server's load: the wait is recorded on the turn, never in the model's time.
  const admitted = c.client.admit ? await c.client.admit(c.signal) : undefined;
  if (admitted?.admission.forced)
    c.log.warn(
      { model: c.model, waitedMs: admitted.admission.waitedMs, heldBy: admitted.admission.heldBy },
      'policy call sent without room on the server after the longest admission wait',
    );
  if (admitted) {
    c.metrics.policyAdmission(c.model, admitted.admission.waitedMs);
    c.metrics.inferenceLoad(admitted.admission.server, admitted.admission.inFlight, admitted.admission.load);
  }
  const started = performance.now();
  const callStartedAt = Date.now();
  let response: PolicyResponse;
  try {
    response = await c.client.next({
      messages: c.messages,
      tools: c.tools,
      task: c.task,
      rolloutIndex: c.rolloutIndex,
      attempt: c.attempt,
      turn: c.turn,
      previousTokens: c.previousTokens && 'promptIds' in c.previousTokens ? c.previousTokens : null,
      sessionKey: c.sessionKey,
      policyVersion: c.policyVersion,
    });
  } catch (err) {
    const failure = clientFailure(err).name;
    c.metrics.policyError(c.model, failure);
    c.log.warn({ model: c.model, failure, error: err instanceof Error ? err.message : String(err) }, 'policy call failed');
    throw err;
  } finally {
    if (admitted) c.metrics.inferenceLoad(admitted.admission.server, admitted.release(), null);
  }
  const latencyMs = performance.now() - started;
  c.metrics.policyCall(c.model, latencyMs);
  const tokens = response.turnTokens ?? (c.noTokensReason !== undefined ? { reason: c.noTokensReason } : undefined);
  const integrity = turnIntegrity(tokens, c.previousTokens, c.turn === 0, response.promptProblem);
  const record: PolicyTurnRecord = {
    turn: c.turn,
    latencyMs,
    clock: { stepStartedAt, callStartedAt, callEndedAt: callStartedAt + latencyMs },
    ...response,
    policyVersion: c.policyVersion,
    prefixCheck: integrity.prefixCheck,
    ...(admitted ? { admission: admitted.admission } : {}),
  };
  return { record, integrity };
}

/** The class and type of a policy client's error (`model/context_overflow`, `infra/policy_unavailable`, ...), with whether a retry may help. */
export function clientFailure(err: unknown): { name: string; message: string; retryable: boolean } {
  if (err instanceof ApplicationFailure) return { name: err.type ?? 'Error', message: err.message, retryable: !err.nonRetryable };
  const e = err as { name?: string; message?: string; failureClass?: string; type?: string };
  if (e.failureClass && e.type) return { name: `${e.failureClass}/${e.type}`, message: e.message ?? '', retryable: e.failureClass === 'infra' };
  return { name: e.name ?? 'Error', message: e.message ?? String(err), retryable: true };
}
