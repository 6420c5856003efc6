/**
 * Token capture for chat completions (token mode `server`): the completion
 * ids and logprobs from the answer, the prompt ids from the answer when the
 * server sends them (vLLM return_token_ids), else from the server's own
 * template and tokenizer endpoints (llama.cpp), checked against the prompt
 * token count the server reports. What cannot be had is recorded with why.
 */
import type { MissingTokens, TurnTokens } from '../../shared/tokens.js';
import type { ChatMessage, ToolSchema } from '../../shared/tools.js';
import { parseCompletionTokens, serverPromptIds } from './completionTokens.js';
import { EndpointMissing, type ServerEndpoints } from './serverEndpoints.js';

export type RenderedPrompt = { ids: number[] } | MissingTokens;

/** Renders and tokenizes the prompt as the server would; started beside the chat call, awaited after it. */
export async function renderServerPrompt(endpoints: ServerEndpoints, messages: readonly ChatMessage[], tools: readonly ToolSchema[]): Promise<RenderedPrompt> {
  try {
    return { ids: await endpoints.tokenize(await endpoints.applyTemplate(messages, tools), true) };
  } catch (err) {
    if (err instanceof EndpointMissing) return { reason: `the server sent no prompt ids and cannot render them: ${err.message}` };
    return { reason: `rendering the prompt through ${endpoints.root} failed: ${err instanceof Error ? err.message : String(err)}` };
  }
}

export function serverTurnTokens(
  response: Record<string, unknown>,
  choice: Record<string, unknown>,
  rendered: RenderedPrompt | undefined,
  topLogprobs: number,
): TurnTokens | MissingTokens {
  const completion = parseCompletionTokens(choice, topLogprobs);
  if ('missing' in completion) return { reason: completion.missing };
  const top = completion.top ? { topLogprobs: completion.top } : {};
  const fromServer = serverPromptIds(response, choice);
  if (fromServer) return { source: 'server', promptIds: fromServer, completionIds: completion.ids, completionLogprobs: completion.logprobs, ...top };
  if (!rendered) return { reason: 'the server sent no prompt ids' };
  if ('reason' in rendered) return rendered;
  const reported = (response.usage as { prompt_tokens?: unknown } | undefined)?.prompt_tokens;
  if (typeof reported === 'number' && reported !== rendered.ids.length) {
    return { reason: `the prompt rendered through the server's template has ${rendered.ids.length} ids but the server reports ${reported} prompt tokens: not the ids it saw` };
  }
  return { source: 'server-rendered', promptIds: rendered.ids, completionIds: completion.ids, completionLogprobs: completion.logprobs, ...top };
}
