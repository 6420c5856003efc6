/**
 * Exact tokens for training (DESIGN.md): what one policy call records about
 * the token ids the server saw and generated, the exact-prefix check between
 * turns, and the integrity summary a rollout carries. No dependencies but zod:
 * workflows import the types.
 */
import { z } from 'zod';

/**
 * How the openai policy gets token ids.
 * - `server`: chat completions; the server is asked for ids (`return_token_ids` for vLLM, logprobs
 *   with token `id` for llama.cpp) and, when it does not send prompt ids, the prompt is rendered by
 *   its `/apply-template` and tokenized by its `/tokenize` (llama.cpp), so they are the ids it saw.
 * - `pipeline`: the pipeline renders and tokenizes the prompt itself and sends token ids to
 *   `/v1/completions`: turn k+1's prompt is turn k's prompt + its completion + the new messages'
 *   tokens, so the exact-prefix rule holds by construction. Tool calls are parsed from the text.
 * - `off`: nothing asked (hosted APIs that refuse unknown request fields); turns have no ids.
 */
export const TokenModeSchema = z.enum(['server', 'pipeline', 'off']);
export type TokenMode = z.infer<typeof TokenModeSchema>;

/**
 * The chat template the pipeline renders with in `pipeline` mode, as the workflow input carries
 * it: the file it was read from, its sha256 (recorded in the experiment record and on every turn)
 * and its text. The client (submitBatch, `rollout run --chat-template`) reads and checks the file.
 */
export const ChatTemplateSchema = z
  .object({
    file: z.string().min(1),
    sha256: z.string().regex(/^[0-9a-f]{64}$/, { error: 'a sha256 is 64 lowercase hex digits' }),
    text: z.string().min(1),
  })
  .strict();
export type ChatTemplate = z.output<typeof ChatTemplateSchema>;

export const TokenCaptureSchema = z
  .object({
    mode: TokenModeSchema.default('server'),
    /**
     * Root of the server's non-OpenAI endpoints (/tokenize, /detokenize, /apply-template), e.g.
     * http://127.0.0.1:8080. Default: baseUrl without its trailing /v1.
     */
    serverUrl: z.url().optional(),
    /**
     * What logprobs a vLLM or SGLang server returns: `raw` (their default: the model's softmax before
     * temperature and truncation) or `processed` (vLLM started with --logprobs-mode processed_logprobs).
     * llama.cpp is asked for its post-sampling probabilities whenever the sampling reshapes the distribution.
     */
    serverLogprobs: z.enum(['raw', 'processed']).default('raw'),
    /** Top alternatives kept per generated token (0: only the chosen token's logprob). */
    topLogprobs: z.number().int().min(0).max(20).default(0),
    /**
     * `pipeline` mode only: the chat template to render prompts with instead of the server's. Give a
     * file path (a Jinja chat template; submitBatch reads and checks it) or the resolved form.
     */
    chatTemplate: z.union([z.string().min(1), ChatTemplateSchema]).optional(),
  })
  .strict()
  .refine((t) => t.chatTemplate === undefined || t.mode === 'pipeline', {
    error: 'chatTemplate is what the pipeline renders prompts with, so it needs tokens.mode "pipeline" (in server mode the server renders with its own template)',
    path: ['chatTemplate'],
  });
export type TokenCapture = z.output<typeof TokenCaptureSchema>;

/** Where a turn's ids came from. */
export type TokenSource =
  /** The server returned prompt and completion ids (vLLM return_token_ids). */
  | 'server'
  /** Completion ids from the server's logprobs, prompt ids from its own template and tokenizer endpoints. */
  | 'server-rendered'
  /** The pipeline built the prompt ids (token-level mode). */
  | 'pipeline';

/** The token data of one policy call, as the trajectory store keeps it. */
export interface TurnTokens {
  source: TokenSource;
  promptIds: number[];
  completionIds: number[];
  /** One per completion id. */
  completionLogprobs: number[];
  /** Per completion id, the top alternatives when asked for (topLogprobs > 0). */
  topLogprobs?: { id: number; logprob: number }[][];
  /** Pipeline mode: the template the prompt was rendered with (configured: tokens.chatTemplate; server: the one /props reports). */
  chatTemplate?: { source: 'configured' | 'server'; sha256: string; file?: string };
  /** How the tokens were sampled and which distribution the logprobs are of; absent in records made before it was kept. */
  sampling?: TurnSampling;
}

/** The kinds of inference server the policy knows the sampling fields and logprob semantics of (`auto`: probed once). */
export const SERVER_KINDS = ['llama.cpp', 'vllm', 'sglang', 'openai'] as const;
export type ServerKind = (typeof SERVER_KINDS)[number];

/** The parameters that shape the distribution a token is sampled from (null: not set, the server's own default). */
export interface SamplingParams {
  temperature: number | null;
  top_p: number | null;
  /** 0 or less: no top-k truncation. */
  top_k: number | null;
  min_p: number | null;
  presence_penalty: number | null;
  frequency_penalty: number | null;
  repetition_penalty: number | null;
}

export type SamplingParamName = keyof SamplingParams;
const ALL_SAMPLING_PARAMS: readonly SamplingParamName[] = ['temperature', 'top_p', 'top_k', 'min_p', 'presence_penalty', 'frequency_penalty', 'repetition_penalty'];

/** The sampling fields each kind of server takes; the OpenAI API has no top_k, min_p or repetition penalty. */
export const SAMPLING_FIELDS_TAKEN: Record<ServerKind, readonly SamplingParamName[]> = {
  'llama.cpp': ALL_SAMPLING_PARAMS,
  vllm: ALL_SAMPLING_PARAMS,
  sglang: ALL_SAMPLING_PARAMS,
  openai: ['temperature', 'top_p', 'presence_penalty', 'frequency_penalty'],
};

/** Sampling fields set that a server kind cannot take, as an error that names them and the fix; undefined when none. */
export function unsupportedSampling(kind: ServerKind, sampling: Partial<Record<SamplingParamName, number | undefined>>): string | undefined {
  const taken = SAMPLING_FIELDS_TAKEN[kind];
  const set = ALL_SAMPLING_PARAMS.filter((name) => sampling[name] !== undefined && !taken.includes(name));
  if (set.length === 0) return undefined;
  return (
    `sampling.${set.join(', sampling.')} cannot be sent to a server of kind ${kind}, which takes ${taken.join(', ')}. ` +
    `Fix: remove ${set.length > 1 ? 'them' : 'it'} from policy.sampling, or set policy.server to the kind that serves the endpoint${kind === 'openai' ? ' (llama.cpp, vllm or sglang)' : ''}`
  );
}

/**
 * How one turn's tokens were sampled and what its logprobs are: the distribution a trainer's
 * importance ratio needs is the one that sampled the token (DESIGN.md, "Exact tokens").
 */
export interface TurnSampling {
  server: ServerKind;
  params: SamplingParams;
  /** `server`: what the server reports it used (llama.cpp's generation_settings); `request`: what was sent (the server reports nothing). */
  paramsFrom: 'server' | 'request';
  /**
   * `raw`: the softmax of the model's logits (no temperature, no truncation); `post-sampling`: the
   * distribution after the server's samplers, the one it drew from (llama.cpp post_sampling_probs);
   * `processed`: after temperature and truncation, as the operator declared the server returns them
   * (vLLM --logprobs-mode processed_logprobs: tokens.serverLogprobs).
   */
  logprobs: 'raw' | 'post-sampling' | 'processed';
  /** Why these logprobs cannot be those of the distribution that sampled the tokens; absent when they are. */
  mismatch?: string;
}

/** Why a turn has no token ids. */
export interface MissingTokens {
  reason: string;
}

/** The exact-prefix check of one turn against the previous turn of the same attempt. */
export type PrefixCheck =
  | { ok: true }
  | {
      ok: false;
      /** First index in this turn's prompt ids where it differs from previous prompt + completion. */
      position: number;
      expected: number | null;
      actual: number | null;
      reason: string;
    };

/** A rollout's token integrity, over the attempt that produced its result. */
export interface TokenIntegrity {
  /** ok: every turn has ids and each prompt extends the previous turn; broken: a prefix break; missing: a turn without ids. */
  status: 'ok' | 'broken' | 'missing';
  attempt: number;
  turns: number;
  /** The first turn that broke the rule or lacked ids. */
  turn?: number;
  /** The token position in that turn's prompt where the break is. */
  position?: number;
  reason?: string;
  /**
   * Turns (after turn 0) that start a new training segment: a harness (policy kind harness) rewrote its
   * history there, so the prompt does not extend the previous turn's ids by design. Each segment is
   * exported as its own sample of the rollout (client/export/).
   */
  segmentStarts?: number[];
}

/** Compares a prompt against the previous turn's prompt + completion: it must begin with them, id for id. */
export function checkPrefix(previous: { promptIds: readonly number[]; completionIds: readonly number[] }, promptIds: readonly number[]): PrefixCheck {
  const expected = [...previous.promptIds, ...previous.completionIds];
  for (let i = 0; i < expected.length; i++) {
    if (i >= promptIds.length) {
      return {
        ok: false,
        position: i,
        expected: expected[i] ?? null,
        actual: null,
        reason: `the prompt (${promptIds.length} ids) is shorter than the previous prompt + completion (${expected.length} ids)`,
      };
    }
    if (promptIds[i] !== expected[i]) {
      return {
        ok: false,
        position: i,
        expected: expected[i] ?? null,
        actual: promptIds[i] ?? null,
        reason: `prompt id ${promptIds[i]} at position ${i} where the previous turn had ${expected[i]} (re-rendered differently)`,
      };
    }
  }
  return { ok: true };
}
