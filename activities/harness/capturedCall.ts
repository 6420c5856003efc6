/**
 * One model call of a harness, captured: the harness's request is forwarded to the real inference
 * server by the group's own policy client (its sampling, token mode, admission and tool-call parser;
 * what the harness asked for itself is kept beside, not sent), and the answer is recorded as a turn of
 * the rollout (PolicyTurnRecord: prompt and completion ids, logprobs, policy version, parsers) before
 * the harness gets it back as an OpenAI chat completion.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { PolicyTurnRecord } from '../agent/conversation.js';
import type { PipelineMetrics } from '../pipelineMetrics.js';
import type { PolicyClient, PolicyResponse } from '../policies/policyClient.js';
import { turnIntegrity, type TurnTokenStatus } from '../policies/tokens/turnIntegrity.js';
import type { LoadedTask } from '../../shared/task.js';
import type { MissingTokens, TurnTokens } from '../../shared/tokens.js';
import type { ChatMessage, ToolSchema } from '../../shared/tools.js';

/** Fields of the harness's request the group's sampling replaces (recorded, never sent). */
const HARNESS_SAMPLING_FIELDS = ['temperature', 'top_p', 'top_k', 'min_p', 'max_tokens', 'max_completion_tokens', 'seed', 'presence_penalty', 'frequency_penalty', 'logprobs', 'top_logprobs', 'n', 'stop'];

export interface HarnessRequest {
  messages: ChatMessage[];
  tools: ToolSchema[];
  /** What the harness asked for that the group's sampling decides instead. */
  overridden: Record<string, unknown>;
}

/** The harness's request body, or why it cannot be served. */
export function readHarnessRequest(body: Record<string, unknown>): HarnessRequest | string {
  if (body.stream === true) return 'streaming is not served: the capture endpoint answers non-streaming chat completions only (set the harness to stream: false)';
  if (!Array.isArray(body.messages) || body.messages.length === 0) return 'the request has no messages';
  const messages = body.messages as ChatMessage[];
  const bad = messages.findIndex((m) => typeof m !== 'object' || m === null || typeof (m as { role?: unknown }).role !== 'string');
  if (bad >= 0) return `messages[${bad}] has no role`;
  const tools = Array.isArray(body.tools) ? (body.tools as ToolSchema[]) : [];
  const overridden: Record<string, unknown> = {};
  for (const f of HARNESS_SAMPLING_FIELDS) if (body[f] !== undefined && body[f] !== null) overridden[f] = body[f];
  return { messages, tools, overridden };
}

/** The answer as the harness reads it: an OpenAI chat completion. */
export function chatCompletion(response: PolicyResponse, turn: number): Record<string, unknown> {
  const message: Record<string, unknown> = { role: 'assistant', content: response.assistant.content };
  if (response.assistant.tool_calls && response.assistant.tool_calls.length > 0) message.tool_calls = response.assistant.tool_calls;
  return {
    id: `rollout-turn-${turn}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: response.model,
    choices: [{ index: 0, message, finish_reason: response.finishReason ?? (message.tool_calls ? 'tool_calls' : 'stop') }],
    usage: response.usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  };
}

export interface CallContext {
  client: PolicyClient;
  task: LoadedTask;
  rolloutIndex: number;
  attempt: number;
  turn: number;
  sessionKey: string;
  policyVersion: number;
  previousTokens: TurnTokens | MissingTokens | undefined;
  signal?: AbortSignal;
  /** The worker's metrics: a harness's calls count as every policy call does (latency, admission wait, server load, errors). */
  metrics: PipelineMetrics;
  /** The name the metrics carry (policyLabel). */
  model: string;
}

export interface CapturedCall {
  record: PolicyTurnRecord;
  tokens: TurnTokenStatus;
}

/** Asks the inference server through the group's client and builds the turn's record; the client's errors are thrown as they came. */
export async function captureCall(request: HarnessRequest, c: CallContext): Promise<CapturedCall> {
  const stepStartedAt = Date.now();
  const admitted = c.client.admit ? await c.client.admit(c.signal) : undefined;
  if (admitted) {
    c.metrics.policyAdmission(c.model, admitted.admission.waitedMs);
    c.metrics.inferenceLoad(admitted.admission.server, admitted.admission.inFlight, admitted.admission.load);
  }
  const callStartedAt = Date.now();
  const started = performance.now();
  let response: PolicyResponse;
  try {
    response = await c.client.next({
      messages: request.messages,
      tools: request.tools,
      task: c.task,
      rolloutIndex: c.rolloutIndex,
      attempt: c.attempt,
      turn: c.turn,
      previousTokens: c.previousTokens && 'promptIds' in c.previousTokens ? c.previousTokens : null,
      sessionKey: c.sessionKey,
      policyVersion: c.policyVersion,
    });
  } catch (err) {
    c.metrics.policyError(c.model, clientFailure(err).name);
    throw err;
  } finally {
    if (admitted) c.metrics.inferenceLoad(admitted.admission.server, admitted.release(), null);
  }
  const latencyMs = performance.now() - started;
  c.metrics.policyCall(c.model, latencyMs);
  const integrity = turnIntegrity(response.turnTokens, c.previousTokens, c.turn === 0, response.promptProblem);
  const record: PolicyTurnRecord = {
    turn: c.turn,
    latencyMs,
    clock: { stepStartedAt, callStartedAt, callEndedAt: callStartedAt + latencyMs },
    ...response,
    policyVersion: c.policyVersion,
    prefixCheck: integrity.prefixCheck,
    ...(admitted ? { admission: admitted.admission } : {}),
    harnessRequest: { messages: request.messages, tools: request.tools, ...(Object.keys(request.overridden).length > 0 ? { overridden: request.overridden } : {}) },
  };
  return { record, tokens: integrity.status };
}

/** The class and type of a policy client's error (`model/context_overflow`, `infra/policy_unavailable`, ...), with whether a retry may help. */
export function clientFailure(err: unknown): { name: string; message: string; retryable: boolean } {
  if (err instanceof ApplicationFailure) return { name: err.type ?? 'Error', message: err.message, retryable: !err.nonRetryable };
  const e = err as { name?: string; message?: string; failureClass?: string; type?: string };
  if (e.failureClass && e.type) return { name: `${e.failureClass}/${e.type}`, message: e.message ?? '', retryable: e.failureClass === 'infra' };
  return { name: e.name ?? 'Error', message: e.message ?? String(err), retryable: true };
}
