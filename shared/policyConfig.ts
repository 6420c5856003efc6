/**
 * The policy a group samples from: scripted, an OpenAI-compatible server, or a published harness;
 * with its sampling and token capture settings. Part of the pipeline contract (shared/pipeline.ts).
 */
import { z } from 'zod';
import { SERVER_KINDS, TokenCaptureSchema, unsupportedSampling } from './tokens.js';
import { TOOL_CALL_PARSERS } from './tools.js';

export const ScriptedPolicySchema = z
  .object({
    kind: z.literal('scripted'),
    /**
     * oracle: uploads and runs the task's reference solution, then submits.
     * noop:   submits at once.
     * mixed:  oracle on even rollout indices, a known-bad solution (or noop) on odd ones,
     *         so a group has rewards that differ and advantages that are not all zero.
     * stall:  runs `true` forever and never submits (hits max turns).
     * adversarial: the escape suite; rollout i makes escape attempt i mod 8 (host secrets,
     *         network, writes outside the workspace, fork bomb, memory hog, a lingering
     *         process, replaced tests, a fake reward) and submits without solving the task
     *         (policies/adversarial/adversarialPolicy.ts).
     */
    script: z.enum(['oracle', 'noop', 'mixed', 'stall', 'adversarial']),
  })
  .strict();

/**
 * Tokens one turn may generate when `sampling.max_tokens` is not given: a quarter of a 4k
 * context, so one turn cannot outgrow any context of 4k tokens or more, and a model that
 * rambles is cut off (a call cut off this way is a malformed call, the model's).
 */
export const DEFAULT_MAX_TOKENS_PER_TURN = 1024;

/** The longest a policy call may take: inside the policyStep activity's 5-minute start-to-close timeout. */
export const MAX_REQUEST_TIMEOUT_MS = 280_000;

/**
 * What shapes the distribution tokens are sampled from. Unset fields are sent as RL needs them, not
 * left to the server's defaults (llama.cpp's are temperature 0.8, top_k 40, top_p 0.95, min_p 0.05):
 * temperature 1, no truncation, no penalties. A field the server kind cannot take is an error
 * (policies/sampling/).
 */
export const SamplingSchema = z
  .object({
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().gt(0).max(1).optional(),
    /** Keep the k most probable tokens; 0 or -1: no top-k truncation. */
    top_k: z.number().int().min(-1).optional(),
    min_p: z.number().min(0).max(1).optional(),
    presence_penalty: z.number().min(-2).max(2).optional(),
    frequency_penalty: z.number().min(-2).max(2).optional(),
    /** Multiplicative repetition penalty (llama.cpp repeat_penalty, vLLM/SGLang repetition_penalty); 1: none. */
    repetition_penalty: z.number().gt(0).optional(),
    max_tokens: z.number().int().positive().default(DEFAULT_MAX_TOKENS_PER_TURN),
    seed: z.number().int().optional(),
    /** Ask the server for token logprobs (kept in the trajectory when returned). */
    logprobs: z.boolean().optional(),
  })
  .strict();

const ToolCallParserSchema = z.enum(TOOL_CALL_PARSERS);

function unknownToolCallParser(input: unknown): string {
  const names: unknown[] = Array.isArray(input) ? input : [input];
  const unknown = names.find((n) => !(TOOL_CALL_PARSERS as readonly unknown[]).includes(n));
  return `unknown tool-call parser ${JSON.stringify(unknown)}; the parsers are ${TOOL_CALL_PARSERS.join(', ')} (one name, or a list tried in order)`;
}

export const OpenAIPolicySchema = z
  .object({
    kind: z.literal('openai'),
    /** Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1 (vLLM, SGLang, a provider). */
    baseUrl: z.url(),
    model: z.string().min(1),
    /** Name of the environment variable holding the API key on the workers (never the key itself). */
    apiKeyEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/).default('OPENAI_API_KEY'),
    sampling: SamplingSchema.prefault({}),
    /**
     * What serves baseUrl, for the sampling fields it takes and what its logprobs mean: `auto` probes
     * it once per worker (llama.cpp /props, SGLang /get_server_info, vLLM /version; else `openai`).
     */
    server: z.enum(['auto', ...SERVER_KINDS]).default('auto'),
    /**
     * How long one policy call may take. When absent it is derived from sampling.max_tokens
     * (policies/generationBudget/turnBudget.ts). A call that runs past it while the
     * server answers a health probe is the model's (model/generation_too_long), else infra.
     */
    requestTimeoutMs: z
      .number()
      .int()
      .positive()
      .max(MAX_REQUEST_TIMEOUT_MS, { error: `at most ${MAX_REQUEST_TIMEOUT_MS} ms: a policy call runs inside an activity limited to 5 minutes; lower sampling.max_tokens for a shorter turn` })
      .optional(),
    /** Where tool calls are read from; a list is tried in order and the first that finds calls wins (shared/tools.ts). */
    toolCallParser: z
      .union([ToolCallParserSchema, z.array(ToolCallParserSchema).min(1)], { error: (issue) => unknownToolCallParser(issue.input) })
      .default('server'),
    /** Token ids per turn for training (shared/tokens.ts): asked from the server (`server`), built by the pipeline (`pipeline`), or not at all (`off`, for APIs that refuse the extra fields). */
    tokens: TokenCaptureSchema.prefault({}),
    /**
     * Admission by the server's own load (policies/admission/): `load` sends a call only while
     * the server has room (KV cache under kvHigh, back under kvLow after it passed it; nothing queued; an
     * idle llama.cpp slot), waiting at most maxWaitSec; `off` sends every call at once.
     */
    admission: z
      .object({
        mode: z.enum(['load', 'off']).default('load'),
        kvHigh: z.number().gt(0).max(1).default(0.8),
        kvLow: z.number().min(0).lt(1).default(0.6),
        maxWaitSec: z.number().min(0).max(240).default(60),
      })
      .strict()
      .refine((a) => a.kvLow < a.kvHigh, { error: 'admission.kvLow must be below admission.kvHigh (admit again under kvLow after passing kvHigh)' })
      .prefault({}),
  })
  .strict()
  .superRefine((policy, ctx) => {
    const problem = policy.server === 'auto' ? undefined : unsupportedSampling(policy.server, policy.sampling);
    if (problem) ctx.addIssue({ code: 'custom', message: problem, path: ['sampling'] });
  });

/** The published agent harnesses the `harness` policy runs, and the version each is pinned to (harnesses/). */
/** terminus-2 is Harbor's agent; its version is the `harbor` package's. */
export const HARNESS_VERSIONS = { 'mini-swe-agent': '2.4.6', 'terminus-2': '0.25.0' } as const;
export type HarnessName = keyof typeof HARNESS_VERSIONS;
export const HARNESS_NAMES = Object.keys(HARNESS_VERSIONS) as HarnessName[];

/**
 * An agent harness as it is published (PyPI), unmodified, drives the sandbox: its commands run in the
 * rollout's sandbox through the provider, and its model calls go to an endpoint the pipeline serves
 * for the rollout, which forwards them to `inference` with the group's sampling and token mode and
 * records each as a turn (harnesses/).
 */
export const HarnessPolicySchema = z
  .object({
    kind: z.literal('harness'),
    harness: z.string().superRefine((name, ctx) => {
      if (!(HARNESS_NAMES as string[]).includes(name))
        ctx.addIssue({
          code: 'custom',
          message: `unknown harness ${JSON.stringify(name)}; the harnesses are ${HARNESS_NAMES.join(', ')}. Fix: set policy.harness to one of them, or policy.kind to openai for the pipeline's own agent loop`,
        });
    }),
    /** The harness's published version; only the pinned one is installed by the set-up purpose `harness`. */
    version: z.string().optional(),
    /** The harness's own settings, passed to it as they are (e.g. mini-swe-agent's agent and model settings); the pipeline sets the model endpoint and the limits. */
    settings: z.record(z.string(), z.unknown()).default({}),
    /** The real inference server the captured calls are forwarded to, with its sampling and token mode. */
    inference: OpenAIPolicySchema,
  })
  .strict()
  .superRefine((policy, ctx) => {
    const pinned = (HARNESS_VERSIONS as Record<string, string>)[policy.harness];
    if (pinned !== undefined && policy.version !== undefined && policy.version !== pinned)
      ctx.addIssue({
        code: 'custom',
        path: ['version'],
        message: `${policy.harness} ${policy.version} is not the version this pipeline runs (${pinned}). Fix: leave policy.version out, or set it to ${pinned}`,
      });
  });

export const PolicyConfigSchema = z.discriminatedUnion('kind', [ScriptedPolicySchema, OpenAIPolicySchema, HarnessPolicySchema]);

export type PolicyConfig = z.input<typeof PolicyConfigSchema>;
export type ResolvedPolicyConfig = z.output<typeof PolicyConfigSchema>;
