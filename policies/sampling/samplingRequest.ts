/**
 * The sampling fields of one policy request, the same for chat completions
 * (openaiPolicy.ts) and token-level completions (tokens/tokenLevelPolicy.ts).
 *
 * Every field that shapes the distribution is sent, in the server kind's own
 * names: what the user set, as set; the rest as RL needs it (temperature 1, no
 * truncation, no penalties), never the server's defaults (llama.cpp samples at
 * temperature 0.8, top_k 40, top_p 0.95, min_p 0.05 unless told). Where the
 * sampling reshapes the distribution, llama.cpp is asked for its post-sampling
 * probabilities, so the logprobs are those of the distribution it drew from;
 * unshaped, its raw logprobs are that distribution (and cost less: the
 * post-sampling list over the whole vocabulary cost 12 ms a token here).
 * Plus the turn's max_tokens and one seed per rollout, attempt and turn.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { z } from 'zod';
import { failureName } from '../../shared/failures.js';
import type { SamplingSchema } from '../../shared/pipeline.js';
import { SAMPLING_FIELDS_TAKEN, unsupportedSampling, type SamplingParamName, type SamplingParams, type ServerKind, type TurnSampling } from '../../shared/tokens.js';
import type { PolicyRequest } from '../policyClient.js';

type Sampling = z.output<typeof SamplingSchema>;
type ParamName = SamplingParamName;

/** One seed per rollout, attempt and turn. */
export function turnSeed(seed: number, request: Pick<PolicyRequest, 'rolloutIndex' | 'attempt' | 'turn'>): number {
  return seed + request.rolloutIndex * 100_003 + request.attempt * 1_009 + request.turn;
}

/** The model's own distribution: what is sent for every field the user leaves unset. */
const RL_DEFAULTS: Readonly<SamplingParams> = { temperature: 1, top_p: 1, top_k: 0, min_p: 0, presence_penalty: 0, frequency_penalty: 0, repetition_penalty: 1 };
const PARAM_NAMES = Object.keys(RL_DEFAULTS) as ParamName[];

/** A field's name on the wire, per kind. */
function wireName(kind: ServerKind, name: ParamName): string {
  if (kind === 'llama.cpp' && name === 'repetition_penalty') return 'repeat_penalty';
  return name;
}

/** Whether a value leaves the distribution as it is (temperature 1, no truncation, no penalty). */
const NEUTRAL: Record<ParamName, (v: number) => boolean> = {
  temperature: (v) => v === 1,
  top_p: (v) => v >= 1,
  top_k: (v) => v <= 0,
  min_p: (v) => v === 0,
  presence_penalty: (v) => v === 0,
  frequency_penalty: (v) => v === 0,
  repetition_penalty: (v) => v === 1,
};

/** The parameters that reshape the distribution, for a message ("temperature 0.7, top_k 40"); empty when none does. */
export function shapingText(p: SamplingParams): string {
  return PARAM_NAMES.filter((n) => p[n] !== null && !NEUTRAL[n](p[n]))
    .map((n) => `${n} ${p[n]}`)
    .join(', ');
}

/** Whether the parameters leave the model's distribution as it is (then raw logprobs are the sampling distribution's). */
export function unshaped(p: SamplingParams): boolean {
  return shapingText(p) === '';
}

export interface SamplingRequest {
  /** Fields to merge into the request body. */
  body: Record<string, unknown>;
  /** The parameters as sent (null: the kind takes no such field). */
  sent: SamplingParams;
  /** The logprobs asked for. */
  logprobs: TurnSampling['logprobs'];
}

export function samplingRequest(
  kind: ServerKind,
  sampling: Sampling,
  serverLogprobs: 'raw' | 'processed',
  maxTokens: number,
  request: Pick<PolicyRequest, 'rolloutIndex' | 'attempt' | 'turn'>,
): SamplingRequest {
  const problem = unsupportedSampling(kind, sampling);
  if (problem) throw ApplicationFailure.create({ type: failureName({ failureClass: 'infra', type: 'policy_unavailable' }), message: problem, nonRetryable: true });
  const sent = Object.fromEntries(PARAM_NAMES.map((n) => [n, SAMPLING_FIELDS_TAKEN[kind].includes(n) ? (sampling[n] ?? RL_DEFAULTS[n]) : null])) as unknown as SamplingParams;
  // The OpenAI API's own defaults are no penalties: send those only when set, as hosted APIs may refuse more.
  if (kind === 'openai') for (const n of ['presence_penalty', 'frequency_penalty'] as const) if (sampling[n] === undefined) sent[n] = null;
  const body: Record<string, unknown> = { max_tokens: maxTokens, ...(sampling.seed !== undefined ? { seed: turnSeed(sampling.seed, request) } : {}) };
  for (const n of PARAM_NAMES) {
    const value = sent[n];
    if (value === null) continue;
    // vLLM and SGLang take -1 for "no top-k" in every version; 0 only in newer ones.
    body[wireName(kind, n)] = n === 'top_k' && value <= 0 && kind !== 'llama.cpp' ? -1 : value;
  }
  let logprobs: TurnSampling['logprobs'] = 'raw';
  if (kind === 'llama.cpp') {
    // Samplers the config has no field for, off: they would reshape the distribution unseen.
    Object.assign(body, { typical_p: 1, dry_multiplier: 0, xtc_probability: 0, mirostat: 0, top_n_sigma: -1 });
    // verbose: the answer carries generation_settings, what the server really used (recorded per turn).
    body.verbose = true;
    if (!unshaped(sent)) {
      body.post_sampling_probs = true;
      logprobs = 'post-sampling';
    }
  } else if (kind === 'vllm' || kind === 'sglang') {
    logprobs = serverLogprobs;
  }
  return { body, sent, logprobs };
}
