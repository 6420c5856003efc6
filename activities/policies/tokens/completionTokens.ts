/**
 * Completion token ids and logprobs out of a (chat) completion choice, in the
 * shapes servers send them:
 * - llama.cpp (chat and /v1/completions): `logprobs.content[]` entries with the token `id`;
 * - vLLM with `return_token_ids: true`: `choices[i].token_ids` (and `prompt_token_ids`, on the
 *   response for chat, on the choice for completions), logprobs as `logprobs.content[]` (chat)
 *   or `logprobs.token_logprobs[]` (completions), aligned by position.
 */

export interface ParsedCompletion {
  ids: number[];
  logprobs: number[];
  top?: { id: number; logprob: number }[][];
}

interface ContentEntry {
  id?: unknown;
  logprob?: unknown;
  top_logprobs?: { id?: unknown; logprob?: unknown }[];
}

const isIds = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => Number.isInteger(x));

/** The prompt ids a server returned itself (vLLM return_token_ids), if any. */
export function serverPromptIds(response: Record<string, unknown>, choice: Record<string, unknown>): number[] | undefined {
  if (isIds(response.prompt_token_ids)) return response.prompt_token_ids;
  if (isIds(choice.prompt_token_ids)) return choice.prompt_token_ids;
  return undefined;
}

/** Completion ids and their logprobs, or a reason they are not there. */
export function parseCompletionTokens(choice: Record<string, unknown>, topLogprobs: number): ParsedCompletion | { missing: string } {
  const lp = choice.logprobs as { content?: ContentEntry[] | null; token_logprobs?: unknown } | null | undefined;
  const content = Array.isArray(lp?.content) ? lp.content : undefined;
  const ids = isIds(choice.token_ids) ? choice.token_ids : content?.every((e) => Number.isInteger(e.id)) ? content.map((e) => e.id as number) : undefined;
  if (!ids) return { missing: 'the server returned no completion token ids (neither choices[0].token_ids nor logprobs with token ids); use vLLM with return_token_ids or llama.cpp with logprobs' };
  let logprobs: unknown[] | undefined;
  if (content) logprobs = content.map((e) => e.logprob);
  else if (Array.isArray(lp?.token_logprobs)) logprobs = lp.token_logprobs;
  if (!logprobs || logprobs.length !== ids.length || !logprobs.every((x) => typeof x === 'number' && Number.isFinite(x))) {
    return { missing: `the server returned ${ids.length} completion ids but ${logprobs?.length ?? 'no'} numeric logprobs for them` };
  }
  const parsed: ParsedCompletion = { ids, logprobs: logprobs as number[] };
  if (topLogprobs > 0 && content) {
    parsed.top = content.map((e) => (e.top_logprobs ?? []).filter((t) => Number.isInteger(t.id) && typeof t.logprob === 'number').slice(0, topLogprobs).map((t) => ({ id: t.id as number, logprob: t.logprob as number })));
  }
  return parsed;
}
