/**
 * The openai policy in token-level mode: the pipeline builds the prompt ids
 * (nextPromptIds) and sends them to the server's /v1/completions, which
 * returns the completion ids and logprobs; tool calls are read from the text.
 * Endpoint trouble is infra (retried, never shown to the model), a context
 * overflow is the model's, as for chat completions.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { z } from 'zod';
import { failureName } from '../../../shared/failures.js';
import type { OpenAIPolicySchema } from '../../../shared/pipeline.js';
import type { PolicyClient, PolicyRequest, PolicyResponse } from '../policyClient.js';
import { parseCompletionTokens } from './completionTokens.js';
import { nextPromptIds } from './nextPromptIds.js';
import { postJson, serverRoot, ServerEndpoints } from './serverEndpoints.js';
import { parseTextToolCalls } from './textToolCalls.js';

type OpenAIPolicyConfig = z.output<typeof OpenAIPolicySchema>;

/** One seed per rollout, attempt and turn (the same spread as the chat-completions client). */
export function turnSeed(seed: number, request: Pick<PolicyRequest, 'rolloutIndex' | 'attempt' | 'turn'>): number {
  return seed + request.rolloutIndex * 100_003 + request.attempt * 1_009 + request.turn;
}

interface Completion {
  model?: string;
  choices?: Record<string, unknown>[];
  usage?: Record<string, number>;
}

export class TokenLevelPolicy implements PolicyClient {
  constructor(
    private readonly config: OpenAIPolicyConfig,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  async next(request: PolicyRequest): Promise<PolicyResponse> {
    const { sampling } = this.config;
    const topLogprobs = this.config.tokens.topLogprobs;
    const endpoints = new ServerEndpoints(serverRoot(this.config.baseUrl, this.config.tokens.serverUrl), this.config.requestTimeoutMs);
    const prompt = await nextPromptIds(endpoints, request.messages, request.tools, request.previousTokens ?? null);
    const apiKey = this.env[this.config.apiKeyEnv];
    const url = `${this.config.baseUrl.replace(/\/+$/, '')}/completions`;
    const body = {
      model: this.config.model,
      prompt: prompt.ids,
      ...(sampling.temperature !== undefined ? { temperature: sampling.temperature } : {}),
      ...(sampling.top_p !== undefined ? { top_p: sampling.top_p } : {}),
      ...(sampling.max_tokens !== undefined ? { max_tokens: sampling.max_tokens } : {}),
      ...(sampling.seed !== undefined ? { seed: turnSeed(sampling.seed, request) } : {}),
      logprobs: Math.max(1, topLogprobs),
      return_token_ids: true,
    };
    let parsed: Completion;
    try {
      parsed = await postJson<Completion>(url, body, { timeoutMs: this.config.requestTimeoutMs, ...(apiKey ? { headers: { authorization: `Bearer ${apiKey}` } } : {}) });
    } catch (err) {
      if (err instanceof ApplicationFailure) throw err;
      // The endpoint is missing: token-level mode cannot work against this server; say so once, do not retry.
      throw ApplicationFailure.create({
        type: failureName({ failureClass: 'infra', type: 'policy_unavailable' }),
        message: `token-level mode needs ${url} (a /v1/completions endpoint taking token-id prompts): ${(err as Error).message}. Fix: use tokens.mode "server" for this server`,
        nonRetryable: true,
      });
    }
    const choice = parsed.choices?.[0];
    if (!choice || typeof choice.text !== 'string') throw ApplicationFailure.create({ type: failureName({ failureClass: 'infra', type: 'policy_unavailable' }), message: `policy endpoint ${url} sent no choices[0].text` });
    const text = choice.text;
    const calls = parseTextToolCalls(text, request.turn);
    const completion = parseCompletionTokens(choice, topLogprobs);
    return {
      assistant: { role: 'assistant', content: calls.content, ...(calls.toolCalls.length > 0 ? { tool_calls: calls.toolCalls } : {}) },
      model: parsed.model ?? this.config.model,
      finishReason: typeof choice.finish_reason === 'string' ? choice.finish_reason : null,
      usage: parsed.usage ?? null,
      tokens: null,
      completionText: text,
      ...(calls.parser ? { toolCallParser: calls.parser } : {}),
      turnTokens:
        'missing' in completion
          ? { reason: completion.missing }
          : { source: 'pipeline', promptIds: prompt.ids, completionIds: completion.ids, completionLogprobs: completion.logprobs, ...(completion.top ? { topLogprobs: completion.top } : {}) },
      ...(prompt.problem ? { promptProblem: prompt.problem } : {}),
    };
  }
}
