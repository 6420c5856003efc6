/**
 * The `openai` policy: any OpenAI-compatible chat-completions endpoint with
 * tool calling (vLLM, SGLang, hosted APIs). Endpoint trouble is infra and
 * retried by Temporal on the policy queue (5xx, 429 honouring retry-after,
 * refused connections, timeouts, malformed responses); a context overflow is
 * the model's; a rejected request (bad model name, bad key) fails fast.
 * Token ids and logprobs are asked for and kept in turnTokens (tokens/);
 * when they cannot be had (tokens.mode off, a server without ids), what the
 * server volunteers is kept raw in `tokens`.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { z } from 'zod';
import { failureName } from '../shared/failures.js';
import type { OpenAIPolicySchema } from '../shared/pipeline.js';
import type { AssistantMessage, ChatMessage, ToolCall } from '../shared/tools.js';
import type { PolicyClient, PolicyRequest, PolicyResponse } from './policyClient.js';
import { timedOutCall } from './generationBudget/timedOutCall.js';
import { turnBudget } from './generationBudget/turnBudget.js';
import { readToolCalls, toolCallParsersOf } from './toolCallParsing/readToolCalls.js';
import { samplingRequest } from './sampling/samplingRequest.js';
import { serverKind } from './sampling/serverKind.js';
import { turnSampling } from './sampling/turnSampling.js';
import { wireMessages } from './wireMessages.js';
import { admitCall, type AdmittedCall } from './admission/admitCall.js';
import { requestRouting } from './routing/requestRouting.js';
import { serverRoot, ServerEndpoints } from './tokens/serverEndpoints.js';
import { renderServerPrompt, serverTurnTokens } from './tokens/serverTokenCapture.js';

type OpenAIPolicyConfig = z.output<typeof OpenAIPolicySchema>;

const UNAVAILABLE = failureName({ failureClass: 'infra', type: 'policy_unavailable' });
const OVERFLOW = failureName({ failureClass: 'model', type: 'context_overflow' });

function unavailable(message: string, options: { nonRetryable?: boolean; retryAfterMs?: number } = {}): ApplicationFailure {
  return ApplicationFailure.create({
    type: UNAVAILABLE,
    message,
    nonRetryable: options.nonRetryable ?? false,
    ...(options.retryAfterMs !== undefined ? { nextRetryDelay: options.retryAfterMs } : {}),
  });
}

function retryAfterMs(header: string | null): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isFinite(date) ? Math.max(0, date - Date.now()) : undefined;
}

interface ChatCompletion {
  model?: string;
  choices?: {
    message?: { content?: string | null; tool_calls?: ToolCall[]; reasoning_content?: string | null; reasoning?: string | null };
    finish_reason?: string | null;
    logprobs?: unknown;
    token_ids?: unknown;
  }[];
  usage?: Record<string, number>;
  prompt_token_ids?: unknown;
}

export class OpenAIPolicy implements PolicyClient {
  constructor(
    private readonly config: OpenAIPolicyConfig,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  admit(signal?: AbortSignal): Promise<AdmittedCall> {
    return admitCall(this.config, signal);
  }

  async next(request: PolicyRequest): Promise<PolicyResponse> {
    const { sampling } = this.config;
    const budget = turnBudget(this.config);
    const root = serverRoot(this.config.baseUrl, this.config.tokens.serverUrl);
    const kind = await serverKind(this.config.server, root, budget.timeoutMs);
    const sent = samplingRequest(kind, sampling, this.config.tokens.serverLogprobs, budget.maxTokens, request);
    const route = request.sessionKey !== undefined ? requestRouting(kind, request.sessionKey, request.policyVersion ?? 0) : undefined;
    const body: Record<string, unknown> = {
      model: this.config.model,
      messages: wireMessages(request.messages),
      // A harness that reads its actions from the text (terminus-2) sends no tools: none are offered then.
      ...(request.tools.length > 0 ? { tools: request.tools, tool_choice: 'auto' } : {}),
      ...sent.body,
      ...(sampling.logprobs ? { logprobs: true } : {}),
      ...route?.body,
    };
    // Token ids for training (shared/tokens.ts): vLLM returns them on request, llama.cpp puts the id in each logprobs entry.
    const capture = this.config.tokens.mode === 'server';
    if (capture) Object.assign(body, { logprobs: true, top_logprobs: Math.max(1, this.config.tokens.topLogprobs), return_token_ids: true }); // llama.cpp sends no logprobs at top_logprobs 0
    const rendered = capture ? renderServerPrompt(new ServerEndpoints(root, budget.timeoutMs), body.messages as ChatMessage[], request.tools) : undefined;
    const apiKey = this.env[this.config.apiKeyEnv];
    const url = `${this.config.baseUrl.replace(/\/+$/, '')}/chat/completions`;
    const auth: Record<string, string> = apiKey ? { authorization: `Bearer ${apiKey}` } : {};
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...auth, ...route?.headers },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(budget.timeoutMs),
      });
    } catch (err) {
      if ((err as Error).name === 'TimeoutError') throw await timedOutCall(url, this.config.baseUrl, budget, auth);
      const cause = (err as { cause?: { code?: string } }).cause?.code;
      throw unavailable(`policy endpoint ${url} unreachable: ${cause ?? (err as Error).name}: ${(err as Error).message}`);
    }
    let text = '';
    try {
      text = await response.text();
    } catch (err) {
      if ((err as Error).name === 'TimeoutError') throw await timedOutCall(url, this.config.baseUrl, budget, auth);
    }
    if (response.status === 429)
      throw unavailable(`policy endpoint ${url} is rate limiting (429)`, {
        ...(retryAfterMs(response.headers.get('retry-after')) !== undefined ? { retryAfterMs: retryAfterMs(response.headers.get('retry-after')) } : {}),
      });
    if (response.status >= 500) throw unavailable(`policy endpoint ${url} answered ${response.status}: ${text.slice(0, 300)}`);
    if (response.status >= 400) {
      if (/context[_ ]length|maximum context|too many tokens|context window|context size/i.test(text)) {
        throw ApplicationFailure.create({ type: OVERFLOW, message: `the conversation no longer fits the model's context: ${text.slice(0, 300)}`, nonRetryable: true });
      }
      throw unavailable(
        `policy endpoint ${url} rejected the request (${response.status}); check model, API key (${this.config.apiKeyEnv}) and sampling: ${text.slice(0, 300)}`,
        { nonRetryable: true },
      );
    }
    let parsed: ChatCompletion;
    try {
      parsed = JSON.parse(text) as ChatCompletion;
    } catch {
      throw unavailable(`policy endpoint ${url} sent a response that is not JSON: ${text.slice(0, 200)}`);
    }
    const choice = parsed.choices?.[0];
    if (!choice?.message) throw unavailable(`policy endpoint ${url} sent no choices[0].message: ${text.slice(0, 200)}`);
    const toolCalls = (choice.message.tool_calls ?? []).map((c, i) => ({
      id: c.id || `call_${request.turn}_${i}`,
      type: 'function' as const,
      function: { name: String(c.function?.name ?? ''), arguments: typeof c.function?.arguments === 'string' ? c.function.arguments : JSON.stringify(c.function?.arguments ?? {}) },
    }));
    const read = readToolCalls({ content: choice.message.content ?? null, serverCalls: toolCalls }, toolCallParsersOf(this.config.toolCallParser), (i) => `call_${request.turn}_${i}`);
    const assistant: AssistantMessage = read.assistant;
    const captured = capture ? serverTurnTokens(parsed as unknown as Record<string, unknown>, choice, await rendered, this.config.tokens.topLogprobs) : undefined;
    const turnTokens = captured && 'promptIds' in captured ? { ...captured, sampling: turnSampling(kind, sent, parsed as unknown as Record<string, unknown>) } : captured;
    // Ids and logprobs live in turnTokens alone; when it has none (tokens.mode off, a server that sends no ids) what the server volunteered is kept as it came.
    const raw: Record<string, unknown> = {};
    if (!turnTokens || !('promptIds' in turnTokens)) {
      if (sampling.logprobs && choice.logprobs !== undefined && choice.logprobs !== null) raw.logprobs = choice.logprobs;
      if (choice.token_ids !== undefined) raw.token_ids = choice.token_ids;
      if (parsed.prompt_token_ids !== undefined) raw.prompt_token_ids = parsed.prompt_token_ids;
    }
    const reasoning = choice.message.reasoning_content ?? choice.message.reasoning;
    return {
      assistant,
      ...(typeof reasoning === 'string' && reasoning !== '' ? { reasoning } : {}),
      model: parsed.model ?? this.config.model,
      finishReason: choice.finish_reason ?? null,
      usage: parsed.usage ?? null,
      ...(Object.keys(raw).length > 0 ? { tokens: raw } : {}),
      toolCallParsers: read.toolCallParsers,
      ...(turnTokens ? { turnTokens } : {}),
      ...(read.rawContent !== undefined ? { rawContent: read.rawContent } : {}),
      ...(route ? { routing: route.routing } : {}),
    };
  }
}
