/**
 * What one turn's logprobs are: the parameters the server reports it sampled
 * with (llama.cpp's generation_settings, asked for with `verbose`), else those
 * sent, and whether the logprobs are of the distribution that drew the tokens.
 * A turn whose logprobs cannot be is flagged with why (`mismatch`); the export
 * leaves its rollout out unless asked to keep it (client/export/).
 */
import type { SamplingParams, ServerKind, TurnSampling } from '../../shared/tokens.js';
import { shapingText, unshaped, type SamplingRequest } from './samplingRequest.js';

interface GenerationSettings {
  temperature?: unknown;
  top_p?: unknown;
  top_k?: unknown;
  min_p?: unknown;
  presence_penalty?: unknown;
  frequency_penalty?: unknown;
  repeat_penalty?: unknown;
  typical_p?: unknown;
  mirostat?: unknown;
  xtc_probability?: unknown;
  dry_multiplier?: unknown;
  top_n_sigma?: unknown;
  post_sampling_probs?: unknown;
  grammar?: unknown;
  grammar_lazy?: unknown;
  grammar_triggers?: unknown;
}

/** llama.cpp reports float32 values (0.800000011920929): compared and recorded at 6 significant digits. */
function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? Number(v.toPrecision(6)) : null;
}

/** llama.cpp's answer with `verbose`: the native result (generation_settings, the raw generated text) under __verbose. */
function llamaVerbose(response: Record<string, unknown>): { settings: GenerationSettings; content: string } | undefined {
  const verbose = response.__verbose as { generation_settings?: unknown; content?: unknown } | undefined;
  const settings = verbose?.generation_settings;
  if (typeof settings !== 'object' || settings === null) return undefined;
  return { settings: settings, content: typeof verbose?.content === 'string' ? verbose.content : '' };
}

/** Samplers with no config field that still reshape the distribution, as llama.cpp reports them. */
function otherShaping(gs: GenerationSettings): string[] {
  const found: string[] = [];
  const typical = num(gs.typical_p);
  if (typical !== null && typical < 1) found.push(`typical_p ${typical}`);
  if ((num(gs.mirostat) ?? 0) !== 0) found.push(`mirostat ${num(gs.mirostat)}`);
  if ((num(gs.xtc_probability) ?? 0) > 0) found.push(`xtc_probability ${num(gs.xtc_probability)}`);
  if ((num(gs.dry_multiplier) ?? 0) > 0) found.push(`dry_multiplier ${num(gs.dry_multiplier)}`);
  if ((num(gs.top_n_sigma) ?? -1) > 0) found.push(`top_n_sigma ${num(gs.top_n_sigma)}`);
  return found;
}

/**
 * A grammar masks tokens the model gave mass to: the distribution that drew the tokens is then neither
 * the raw one nor the samplers' (llama.cpp samples first and resamples under the grammar only when the
 * first draw breaks it). A lazy grammar (tool calls in chat mode) applies from its trigger on.
 */
function grammarProblem(gs: GenerationSettings, content: string): string | undefined {
  if (typeof gs.grammar !== 'string' || gs.grammar === '') return undefined;
  if (gs.grammar_lazy !== true) return 'a grammar constrained every token (the server applied one to this request)';
  const triggers = Array.isArray(gs.grammar_triggers) ? (gs.grammar_triggers as { type?: unknown; value?: unknown }[]) : [];
  const words = triggers.filter((t) => t.type === 1 && typeof t.value === 'string').map((t) => t.value as string);
  const fired = words.find((w) => content.includes(w));
  if (fired !== undefined) return `the server's tool-call grammar constrained the tokens after its trigger ${JSON.stringify(fired)} (chat mode with tools; token mode "pipeline" sends no grammar)`;
  if (words.length < triggers.length) return 'the server had a tool-call grammar whose pattern trigger may have constrained tokens (chat mode with tools; token mode "pipeline" sends no grammar)';
  return undefined;
}

function fixFor(kind: ServerKind): string {
  switch (kind) {
    case 'llama.cpp':
      return 'this llama.cpp did not return post-sampling probabilities (post_sampling_probs); use a newer one, or sample unshaped (temperature 1, no truncation, no penalties)';
    case 'vllm':
      return 'start vLLM with --logprobs-mode processed_logprobs and set policy.tokens.serverLogprobs to "processed", or sample unshaped (temperature 1, no truncation, no penalties)';
    case 'sglang':
      return 'SGLang returns the raw model logprobs; sample unshaped (temperature 1, no truncation, no penalties)';
    case 'openai':
      return 'the endpoint does not say which distribution its logprobs are of; sample unshaped (temperature 1, top_p 1)';
  }
}

export function turnSampling(kind: ServerKind, request: SamplingRequest, response: Record<string, unknown>): TurnSampling {
  let params: SamplingParams = request.sent;
  let paramsFrom: TurnSampling['paramsFrom'] = 'request';
  let logprobs = request.logprobs;
  const problems: string[] = [];
  const reported = kind === 'llama.cpp' ? llamaVerbose(response) : undefined;
  let extra: string[] = [];
  if (reported) {
    const gs = reported.settings;
    params = {
      temperature: num(gs.temperature),
      top_p: num(gs.top_p),
      top_k: num(gs.top_k),
      min_p: num(gs.min_p),
      presence_penalty: num(gs.presence_penalty),
      frequency_penalty: num(gs.frequency_penalty),
      repetition_penalty: num(gs.repeat_penalty),
    };
    paramsFrom = 'server';
    logprobs = gs.post_sampling_probs === true ? 'post-sampling' : 'raw';
    extra = otherShaping(gs);
    const grammar = grammarProblem(gs, reported.content);
    if (grammar) problems.push(grammar);
  }
  if (params.temperature === 0) {
    problems.push('temperature 0 samples greedily: the distribution that drew each token is a point mass (logprob 0), not a policy an importance ratio can use');
  } else if (logprobs === 'raw' && (!unshaped(params) || extra.length > 0)) {
    const shaping = [shapingText(params), ...extra].filter(Boolean).join(', ');
    problems.push(`the logprobs are the raw model's, but the server sampled with ${shaping}: ${fixFor(kind)}`);
  }
  return { server: kind, params, paramsFrom, logprobs, ...(problems.length > 0 ? { mismatch: problems.join('; ') } : {}) };
}
