/**
 * The openai policy in token-level mode: the pipeline builds the prompt ids
 * (nextPromptIds, with the server's template or tokens.chatTemplate) and sends them to the server's /v1/completions, which
 * returns the completion ids and logprobs; tool calls are read from the text
 * by the configured text parsers (hermes-tags, then fenced-json, when the
 * setting names only `server`, which parses nothing here).
 * Endpoint trouble is infra (retried, never shown to the model), a context
 * overflow is the model's, as for chat completions.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { z } from 'zod';
import { failureName } from '../../shared/failures.js';
import type { OpenAIPolicySchema } from '../../shared/pipeline.js';
import type { PolicyClient, PolicyRequest, PolicyResponse } from '../policyClient.js';
import { parseCompletionTokens } from './completionTokens.js';
import { nextPromptIds } from './nextPromptIds.js';
import { promptRenderer } from './chatTemplate/promptRenderer.js';
import { postJson, serverRoot, ServerEndpoints } from './serverEndpoints.js';
import { turnBudget } from '../generationBudget/turnBudget.js';
import { readToolCalls, toolCallParsersOf } from '../toolCallParsing/readToolCalls.js';
import { samplingRequest } from '../sampling/samplingRequest.js';
import { serverKind } from '../sampling/serverKind.js';
import { turnSampling } from '../sampling/turnSampling.js';
import { wireMessages } from '../wireMessages.js';
import { admitCall, type AdmittedCall } from '../admission/admitCall.js';
import { requestRouting } from '../routing/requestRouting.js';

type OpenAIPolicyConfig = z.output<typeof OpenAIPolicySchema>;

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

  admit(signal?: AbortSignal): Promise<AdmittedCall> {
    return admitCall(this.config, signal);
  }

  async next(request: PolicyRequest): Promise<PolicyResponse> {
    const { sampling } = this.config;
    const topLogprobs = this.config.tokens.topLogprobs;
    const budget = turnBudget(this.config);
    const endpoints = new ServerEndpoints(serverRoot(this.config.baseUrl, this.config.tokens.serverUrl), budget.timeoutMs);
    const kind = await serverKind(this.config.server, endpoints.root, budget.timeoutMs);
    const sent = samplingRequest(kind, sampling, this.config.tokens.serverLogprobs, budget.maxTokens, request);
    const route = request.sessionKey !== undefined ? requestRouting(kind, request.sessionKey, request.policyVersion ?? 0) : undefined;
    const renderer = promptRenderer(endpoints, this.config.tokens.chatTemplate);
    const prompt = await nextPromptIds(endpoints, renderer.render, wireMessages(request.messages), request.tools, request.previousTokens ?? null);
    const template = await renderer.template();
    const apiKey = this.env[this.config.apiKeyEnv];
    const url = `${this.config.baseUrl.replace(/\/+$/, '')}/completions`;
    const body = {
      model: this.config.model,
      prompt: prompt.ids,
      ...sent.body,
      logprobs: Math.max(1, topLogprobs),
      return_token_ids: true,
      ...route?.body,
    };
    let parsed: Completion;
    try {
      parsed = await postJson<Completion>(url, body, { timeoutMs: budget.timeoutMs, headers: { ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}), ...route?.headers } });
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
    if (!choice || typeof choice.text !== 'string')
      throw ApplicationFailure.create({
        type: failureName({ failureClass: 'infra', type: 'policy_unavailable' }),
        message: `policy endpoint ${url} sent no choices[0].text`,
      });
    const text = choice.text;
    const configured = toolCallParsersOf(this.config.toolCallParser).filter((p) => p !== 'server');
    const read = readToolCalls({ content: text, serverCalls: [] }, configured.length > 0 ? configured : ['hermes-tags', 'fenced-json'], (i) => `call_${request.turn}_${i}`);
    const completion = parseCompletionTokens(choice, topLogprobs);
    return {
      assistant: read.assistant,
      model: parsed.model ?? this.config.model,
      finishReason: typeof choice.finish_reason === 'string' ? choice.finish_reason : null,
      usage: parsed.usage ?? null,
      toolCallParsers: read.toolCallParsers,
      rawContent: text,
      turnTokens:
        'missing' in completion
          ? { reason: completion.missing }
          : {
              source: 'pipeline',
              promptIds: prompt.ids,
              completionIds: completion.ids,
              completionLogprobs: completion.logprobs,
              ...(completion.top ? { topLogprobs: completion.top } : {}),
              ...(template ? { chatTemplate: template } : {}),
              sampling: turnSampling(kind, sent, parsed as Record<string, unknown>),
            },
      ...(prompt.problem ? { promptProblem: prompt.problem } : {}),
      ...(route ? { routing: route.routing } : {}),
    };
  }
}
