/**
 * Completion token ids and logprobs out of a (chat) completion choice, in the
 * shapes servers send them:
 * - llama.cpp (chat and /v1/completions): `logprobs.content[]` entries with the token `id`;
 * - vLLM with `return_token_ids: true`: `choices[i].token_ids` (and `prompt_token_ids`, on the
 *   response for chat, on the choice for completions), logprobs as `logprobs.content[]` (chat)
 *   or `logprobs.token_logprobs[]` (completions), aligned by position;
 * - llama.cpp asked for post-sampling probabilities (`post_sampling_probs`): `prob` and `top_probs`
 *   in place of `logprob` and `top_logprobs`, kept as their natural logarithms.
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
  prob?: unknown;
  top_probs?: { id?: unknown; prob?: unknown }[];
}

/** An entry's logprob: `logprob` as sent, or the log of a post-sampling `prob`. */
function entryLogprob(e: { logprob?: unknown; prob?: unknown }): unknown {
  if (e.logprob !== undefined) return e.logprob;
  return typeof e.prob === 'number' ? Math.log(e.prob) : undefined;
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
  if (content) logprobs = content.map(entryLogprob);
  else if (Array.isArray(lp?.token_logprobs)) logprobs = lp.token_logprobs;
  if (!logprobs || logprobs.length !== ids.length || !logprobs.every((x) => typeof x === 'number' && Number.isFinite(x))) {
    return { missing: `the server returned ${ids.length} completion ids but ${logprobs?.length ?? 'no'} numeric logprobs for them` };
  }
  const parsed: ParsedCompletion = { ids, logprobs: logprobs as number[] };
  if (topLogprobs > 0 && content) {
    parsed.top = content.map((e) =>
      (e.top_logprobs ?? e.top_probs ?? [])
        .map((t) => ({ id: t.id, logprob: entryLogprob(t) }))
        .filter((t): t is { id: number; logprob: number } => Number.isInteger(t.id) && typeof t.logprob === 'number' && Number.isFinite(t.logprob))
        .slice(0, topLogprobs),
    );
  }
  return parsed;
}
