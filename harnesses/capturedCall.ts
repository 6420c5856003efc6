/**
 * One model call of a harness, captured: the harness's request is forwarded to the real inference
 * server by the group's own policy client (its sampling, token mode, admission and tool-call parser;
 * what the harness asked for itself is kept beside, not sent), through the one path every policy call
 * takes (agent/meteredPolicyCall.ts), and the answer is recorded as a turn of
 * the rollout (PolicyTurnRecord: prompt and completion ids, logprobs, policy version, parsers) before
 * the harness gets it back as an OpenAI chat completion.
 */
import type { PolicyTurnRecord } from '../agent/conversation.js';
import { callPolicy, type PolicyCall } from '../agent/meteredPolicyCall.js';
import type { PolicyResponse } from '../policies/policyClient.js';
import type { TurnTokenStatus } from '../policies/tokens/turnIntegrity.js';
import type { ChatMessage, ToolSchema } from '../shared/tools.js';

/** Fields of the harness's request the group's sampling replaces (recorded, never sent). */
const HARNESS_SAMPLING_FIELDS = [
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'max_tokens',
  'max_completion_tokens',
  'seed',
  'presence_penalty',
  'frequency_penalty',
  'logprobs',
  'top_logprobs',
  'n',
  'stop',
];

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

/** Everything of the policy call but the messages and tools, which come from the harness's request. */
export type CallContext = Omit<PolicyCall, 'messages' | 'tools' | 'noTokensReason' | 'stepStartedAt'>;

export interface CapturedCall {
  record: PolicyTurnRecord;
  tokens: TurnTokenStatus;
}

/** Asks the inference server through the group's client (meteredPolicyCall.ts, as every policy call) and keeps the harness's own request on the turn's record. */
export async function captureCall(request: HarnessRequest, c: CallContext): Promise<CapturedCall> {
  const { record, integrity } = await callPolicy({ ...c, messages: request.messages, tools: request.tools });
  const harnessRequest = { messages: request.messages, tools: request.tools, ...(Object.keys(request.overridden).length > 0 ? { overridden: request.overridden } : {}) };
  return { record: { ...record, harnessRequest }, tokens: integrity.status };
}
