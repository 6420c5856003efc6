/**
 * The inference server's own log probability of given tokens after given prefixes: what it would
 * report if it sampled them. llama.cpp's server scores no prompt (its OpenAI endpoint refuses
 * `echo`), so each token is asked for on its own: `/completion` with the prefix as token ids, one
 * token to predict, that token forced by a +100 logit bias, and `n_probs` without post-sampling
 * probabilities: the probability it reports for the sampled token is then the softmax of the model's
 * raw logits at that position (the bias acts in the sampler, after the logits were read), which at
 * temperature 1 with no truncation is the sampling distribution's, as the pipeline samples. The
 * prefix stays in the slot's cache (`slot`, 0 by default), so each position costs one token of
 * compute; sequences scored at once on different slots run side by side.
 *
 * Used after a weight sync to check that the server serves what the trainer trained (the trainer's
 * log probabilities after the step against these).
 */

export class ServerScoringError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ServerScoringError';
  }
}

interface CompletionProbs {
  completion_probabilities?: { id: number; logprob?: number; prob?: number }[];
}

/** The server's log probability of `ids[p]` after `ids[0..p)`, for each position `p` of `positions`. */
export async function serverLogprobs(baseUrl: string, ids: readonly number[], positions: readonly number[], options: { slot?: number; timeoutMs?: number } = {}): Promise<number[]> {
  const root = baseUrl.replace(/\/v1\/?$/, '');
  const out: number[] = [];
  for (const p of positions) {
    if (!Number.isInteger(p) || p < 1 || p >= ids.length) throw new ServerScoringError(`position ${p} is outside the sequence (1..${ids.length - 1}): a token needs a prefix`);
    const token = ids[p] as number;
    const body = {
      prompt: ids.slice(0, p),
      n_predict: 1,
      n_probs: 1,
      post_sampling_probs: false,
      temperature: 1,
      top_k: 0,
      top_p: 1,
      min_p: 0,
      logit_bias: [[token, 100]],
      cache_prompt: true,
      id_slot: options.slot ?? 0,
      samplers: ['temperature'],
    };
    const res = await fetch(`${root}/completion`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(options.timeoutMs ?? 120_000),
    });
    const text = await res.text();
    if (!res.ok) throw new ServerScoringError(`${root}/completion answered ${res.status} for position ${p}: ${text.slice(0, 300)}`);
    const first = (JSON.parse(text) as CompletionProbs).completion_probabilities?.[0];
    if (!first || first.id !== token)
      throw new ServerScoringError(
        `${root}/completion did not return token ${token} at position ${p} with its probability (got ${JSON.stringify(first)?.slice(0, 200)}): is it a llama.cpp server?`,
      );
    const logprob = first.logprob ?? (first.prob !== undefined ? Math.log(first.prob) : undefined);
    if (logprob === undefined) throw new ServerScoringError(`${root}/completion returned no probability for position ${p}`);
    out.push(logprob);
  }
  return out;
}
