/**
 * Inputs and results of the rollout pipeline: what the trainer submits, what
 * each rollout workflow returns, and the experiment record that makes every
 * reward reproducible. Workflows, activities, client and tests share these.
 */
import { z } from 'zod';
import type { FailureClass } from './failures.js';
import { TASK_QUEUES } from './names.js';
import { TaskRefSchema, TaskRequestSchema, type TaskNetwork } from './task.js';
import { SERVER_KINDS, TokenCaptureSchema, unsupportedSampling, type TokenIntegrity } from './tokens.js';
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
     *         (activities/policies/adversarialPolicy.ts).
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
 * (activities/policies/sampling/).
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
     * (activities/policies/generationBudget/turnBudget.ts). A call that runs past it while the
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
     * Admission by the server's own load (activities/policies/admission/): `load` sends a call only while
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

/** The published agent harnesses the `harness` policy runs, and the version each is pinned to (activities/harness/). */
/** terminus-2 is Harbor's agent; its version is the `harbor` package's. */
export const HARNESS_VERSIONS = { 'mini-swe-agent': '2.4.6', 'terminus-2': '0.25.0' } as const;
export type HarnessName = keyof typeof HARNESS_VERSIONS;
export const HARNESS_NAMES = Object.keys(HARNESS_VERSIONS) as HarnessName[];

/**
 * An agent harness as it is published (PyPI), unmodified, drives the sandbox: its commands run in the
 * rollout's sandbox through the provider, and its model calls go to an endpoint the pipeline serves
 * for the rollout, which forwards them to `inference` with the group's sampling and token mode and
 * records each as a turn (activities/harness/).
 */
export const HarnessPolicySchema = z
  .object({
    kind: z.literal('harness'),
    harness: z.string().superRefine((name, ctx) => {
      if (!(HARNESS_NAMES as string[]).includes(name)) ctx.addIssue({ code: 'custom', message: `unknown harness ${JSON.stringify(name)}; the harnesses are ${HARNESS_NAMES.join(', ')}. Fix: set policy.harness to one of them, or policy.kind to openai for the pipeline's own agent loop` });
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
    if (pinned !== undefined && policy.version !== undefined && policy.version !== pinned) ctx.addIssue({ code: 'custom', path: ['version'], message: `${policy.harness} ${policy.version} is not the version this pipeline runs (${pinned}). Fix: leave policy.version out, or set it to ${pinned}` });
  });

export const PolicyConfigSchema = z.discriminatedUnion('kind', [ScriptedPolicySchema, OpenAIPolicySchema, HarnessPolicySchema]);

export type PolicyConfig = z.input<typeof PolicyConfigSchema>;
export type ResolvedPolicyConfig = z.output<typeof PolicyConfigSchema>;

export const RolloutLimitsSchema = z
  .object({
    maxTurns: z.number().int().positive().max(1000).default(30),
    /** Agent time budget in seconds, enforced in the workflow; the task's [agent].timeout_sec when absent. */
    agentTimeoutSec: z.number().positive().optional(),
    /** Timeout of one bash tool call, in seconds. */
    commandTimeoutSec: z.number().positive().default(120),
    /** Output kept per tool call stream, in bytes (the rest is counted and dropped). */
    maxOutputBytes: z.number().int().positive().default(64 * 1024),
  })
  .strict();
export type RolloutLimits = z.output<typeof RolloutLimitsSchema>;

/** What happens when an attempt ends with a failure of a class (DESIGN.md, failure taxonomy). */
export const FailurePolicySchema = z
  .object({
    infra: z
      .object({
        /** Further attempts on a fresh sandbox after an infra failure. */
        retries: z.number().int().min(0).max(10).default(2),
        backoffSec: z.number().min(0).default(1),
        /** When retries are used up: exclude from the baseline, keep a 0 score, or fail the group. */
        onExhausted: z.enum(['mask', 'score', 'fail_group']).default('mask'),
      })
      .strict()
      .default({ retries: 2, backoffSec: 1, onExhausted: 'mask' }),
    model: z.enum(['score', 'mask']).default('score'),
    task: z.enum(['fail_group', 'mask']).default('fail_group'),
    /**
     * After an infra failure at turn k: `replay` continues the next attempt at turn k on its fresh sandbox,
     * restored by replaying the recorded tool calls of turns 0..k-1 and checked call by call (exit codes,
     * and the digest of the sandbox's files each call left, recorded as the attempt runs); turns already
     * done are not generated again. A replay that diverges falls back to turn 0 and says where.
     * `restart`: every attempt starts at turn 0 (no digests are recorded).
     */
    resume: z.enum(['replay', 'restart']).default('restart'),
    /**
     * The reward of a failed attempt: what an attempt gets whose end failure attribution laid on the
     * agent (model/verifier_blocked, model/sandbox_killed, ...: it made verification impossible).
     */
    failedAttemptReward: z.number().default(0),
    /**
     * Most of a group that may be masked (excluded from its baseline); past it the group is reported
     * insufficient with the reason, and a batch past it is flagged. 1 turns the guard off.
     */
    maxMaskedFraction: z.number().min(0).max(1).default(0.5),
  })
  .strict();
export const DEFAULT_FAILURE_POLICY: FailurePolicy = { infra: { retries: 2, backoffSec: 1, onExhausted: 'mask' }, model: 'score', task: 'fail_group', resume: 'restart', failedAttemptReward: 0, maxMaskedFraction: 0.5 };
export type FailurePolicy = z.output<typeof FailurePolicySchema>;

/**
 * Async RL: how many versions behind the current one a group's oldest turn may be
 * (staleness = current version - oldest turn version), and what happens past it:
 * keep: the rollouts stay, tagged with their staleness;
 * restart: a rollout whose attempt would go on past the bound restarts on a fresh sandbox at the current version;
 * drop_group: the group is reported `stale`, no rollout valid.
 */
export const StalenessSchema = z
  .object({
    maxStaleness: z.number().int().min(0).optional(),
    onStale: z.enum(['keep', 'restart', 'drop_group']).default('keep'),
  })
  .strict();
export type Staleness = z.output<typeof StalenessSchema>;

/** A group is one workflow with one child per rollout; its history limits how many fit. */
export const MAX_GROUP_SIZE = 1024;

export const VerifyModeSchema = z.enum(['in-place', 'clean-room']);

/** The rollout a group's rollouts branch from, and where. */
export const BranchOfSchema = z
  .object({
    /** The parent rollout's workflow id, and where its turns are. */
    rolloutWorkflowId: z.string().min(1),
    trajectoryRef: z.string().min(1),
    /** The parent's attempt whose turns are shared. */
    attempt: z.number().int().min(0),
    /** Turns 0..atTurn-1 are shared; each branch generates turn atTurn itself. */
    atTurn: z.number().int().min(1),
  })
  .strict();
export type BranchOf = z.output<typeof BranchOfSchema>;

export const GroupInputSchema = z
  .object({
    batchId: z.string().regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, dot, dash and underscore only'),
    task: TaskRefSchema,
    groupSize: z
      .number()
      .int()
      .min(1, 'a group needs at least 1 rollout (GRPO needs 2 or more to compare)')
      .max(MAX_GROUP_SIZE, `at most ${MAX_GROUP_SIZE} rollouts per group: each group is one workflow whose history must stay small; use several groups or batches`),
    policy: PolicyConfigSchema,
    limits: RolloutLimitsSchema.default({ maxTurns: 30, commandTimeoutSec: 120, maxOutputBytes: 64 * 1024 }),
    failurePolicy: FailurePolicySchema.default(DEFAULT_FAILURE_POLICY),
    /** Fewer valid rollouts than this and the group is reported insufficient instead of averaged. */
    minValid: z.number().int().min(1).default(2),
    verifyMode: VerifyModeSchema.default('in-place'),
    /** Divide mean-centred advantages by the group's reward std (GRPO); off gives plain mean-centring. */
    scaleAdvantagesByStd: z.boolean().default(true),
    /**
     * The version of the weights the policy endpoint serves when the group starts; the trainer
     * advances it while the group runs (advancePolicyVersion). Every turn records the version it ran under.
     */
    policyVersion: z.number().int().min(0).default(0),
    staleness: StalenessSchema.default({ onStale: 'keep' }),
    /**
     * Where each turn's policy call runs. `queue`: an activity on the policy task queue (rate limited
     * there across every worker by `rollout worker --policy-rate`). `local`: a local activity of the
     * rollout's own workflow worker, recorded as a marker in its history: two server round trips fewer
     * per turn, no queue rate limit (docs/benchmarks.md, "Round trips per rollout").
     */
    policyCalls: z.enum(['queue', 'local']).default('queue'),
    /**
     * Where an attempt's agent loop runs once its sandbox is provisioned. `workflow`: in the rollout
     * workflow, each policy call and tool call a task on its queue. `host`: in an attempt workflow on the
     * sandbox's host (a child of the rollout, on the host's task queue), every policy call, tool call,
     * the verdict and the teardown a local activity there (a marker with its summary in the attempt's
     * history): 7 server round trips for a 5-turn rollout instead of 15-29. The policy call then runs on
     * the host's worker (as with policyCalls 'local', no policy-queue rate limit).
     */
    attemptOn: z.enum(['workflow', 'host']).default('workflow'),
    /**
     * What every sandbox of the group may reach, instead of what the task's format gives it (Harbor: the
     * internet unless task.toml says otherwise): `none` (own loopback) or `public` (the internet through
     * user-mode networking, private ranges closed). Unset: the task decides. In the experiment record either way.
     */
    network: z.enum(['none', 'public']).optional(),
    /**
     * The group's rollouts are branches of one rollout (`rollout branch`, branchRollout): each shares its
     * turns 0..atTurn-1 (restored into its own sandbox by replay, the same ids) and goes on from there.
     */
    branchOf: BranchOfSchema.optional(),
    /**
     * Tree-shaped sampling: every rollout that reaches a turn of `atTurns` (before that turn's policy
     * call) starts width-1 branches there, child workflows of it that share its turns so far and go on
     * independently (and branch again at later turns of the list). The group's results hold every
     * rollout of the tree, each naming its parent and branch turn; advantages are computed over the
     * whole group and within each set of siblings (a rollout and the branches it started at a turn).
     * Needs attemptOn 'workflow'.
     */
    branching: z
      .object({
        atTurns: z
          .array(z.number().int().min(1))
          .min(1)
          .max(4)
          .refine((turns) => turns.every((t, i) => i === 0 || t > (turns[i - 1] ?? 0)), { error: 'branching.atTurns must be increasing, e.g. [2, 4]' }),
        width: z.number().int().min(2).max(8),
      })
      .strict()
      .optional(),
    /** Task queues of this pipeline's workers (separate pipelines can share one namespace). */
    taskQueues: z
      .object({ main: z.string().min(1), policy: z.string().min(1) })
      .strict()
      .default({ main: TASK_QUEUES.main, policy: TASK_QUEUES.policy }),
  })
  .strict();
export type GroupInput = z.input<typeof GroupInputSchema>;
export type ResolvedGroupInput = z.output<typeof GroupInputSchema>;

/**
 * What rolloutGroup accepts from any client (the TypeScript API, Python, the
 * CLI): the group input with every default optional and the task named by
 * its directory; the workflow pins the task's id and version before any
 * rollout starts.
 */
export const GroupRequestSchema = GroupInputSchema.extend({ task: TaskRequestSchema });
export type GroupRequest = z.input<typeof GroupRequestSchema>;

export interface RolloutInput {
  group: ResolvedGroupInput;
  index: number;
  /** A branch started by another rollout of the group (group.branching): whose turns it shares, up to which. */
  branchOf?: BranchOf;
  /** The group's policy version when it started this rollout (absent in rollouts started before versions existed). */
  policyVersion?: number;
}

export interface StageTimings {
  /** From the rollout's start to its first sandbox being provisioned (waiting for a worker). */
  queueMs: number;
  provisionMs: number;
  agentMs: number;
  verifyMs: number;
  teardownMs: number;
}

/** The build of the workers that ran a rollout's workflow, as Temporal's Worker Deployments name it. */
export interface WorkerBuild {
  deploymentName: string;
  buildId: string;
}

export interface ExperimentRecord {
  taskId: string;
  taskVersion: string;
  /** Where the task's files were on the worker (replay and rerun load them from there). */
  taskDir: string;
  environmentIdentity: string;
  toolInterfaceHash: string;
  resetRules: string;
  verifierHash: string;
  verifyMode: z.infer<typeof VerifyModeSchema>;
  limits: RolloutLimits & { agentTimeoutSec: number };
  policy: ResolvedPolicyConfig;
  pipelineVersion: string;
  workerIdentity: string;
  sandboxProvider: string;
  /**
   * The Worker Deployment build that ran the rollout's workflow (pinned: the one it started on); null when
   * its workers ran unversioned, absent in records from before builds were recorded.
   */
  workerBuild?: WorkerBuild | null;
  /** What the rollout's sandbox could reach and which setting said so (absent in records from before it was recorded). */
  network?: TaskNetwork;
  /** failurePolicy.resume: how an attempt after an infra failure began (absent in records from before it was recorded). */
  resume?: FailurePolicy['resume'];
}

/** `cancelled`: an operator cancelled the rollout (cancelRollout update); it has no reward and is not valid. */
export type OutcomeClass = 'ok' | FailureClass | 'cancelled';

export interface AttemptSummary {
  attempt: number;
  outcomeClass: OutcomeClass;
  outcomeType: string;
  message: string;
  reward: number | null;
  turns: number;
  /** What failure attribution found (the control, how the sandbox died, the host's health), when it ran. */
  evidence?: string[];
  /** The turns this attempt took over from an earlier one instead of generating them again (failurePolicy.resume 'replay'). */
  resumed?: ResumedTurns;
  /** A resume that was tried and refused: where the replay diverged; the attempt started again at turn 0. */
  divergence?: ReplayDivergence;
}

/** How an attempt came to start at a later turn: which attempt's turns it took over, and how its sandbox was restored. */
export interface ResumedTurns {
  /** Another rollout's turns (a branch's prefix); absent: this rollout's own. */
  fromRollout?: string;
  fromAttempt: number;
  /** Turns 0..turns-1 were taken over; the attempt's own work began at this turn. */
  turns: number;
  /** The answer of the turn the earlier attempt was in when it failed was taken over too (no model call for it either). */
  nextTurnAnswered: boolean;
  method: 'replay';
  /** Tool calls replayed into the fresh sandbox, and the time that took. */
  replayedCalls: number;
  replayMs: number;
  /** Whether each replayed call's state digest was compared (false: the provider has none; exit codes only). */
  stateChecked: boolean;
  /** Replayed calls whose output differed from the recorded one in text only (a time, a duration): kept as recorded. */
  drift: number;
}

/** The first replayed call that did not do what the recorded one did. */
export interface ReplayDivergence {
  fromRollout?: string;
  fromAttempt: number;
  turn: number;
  callIndex: number;
  /** What differed: the exit code, or the areas of the sandbox whose files differ. */
  what: string;
  replayedCalls: number;
  replayMs: number;
}

export interface RolloutResult {
  index: number;
  workflowId: string;
  /** The verifier's reward; null when no attempt produced one (masked or task failure). */
  reward: number | null;
  /** GRPO advantage over the group's valid rollouts; null when this one is excluded. */
  advantage: number | null;
  /** Whether this rollout counts in the group baseline. */
  valid: boolean;
  outcomeClass: OutcomeClass;
  /** `submitted` for a clean finish, else the failure type (max_turns, sandbox_lost, ...). */
  outcomeType: string;
  attempts: number;
  attemptHistory: AttemptSummary[];
  turns: number;
  timings: StageTimings;
  trajectoryRef: string;
  experiment: ExperimentRecord | null;
  /** Exact-prefix check over the attempt that produced the result (absent for rollouts from before it existed). */
  tokenIntegrity?: TokenIntegrity;
  /** The policy version of every turn of that attempt, in order. */
  policyVersions?: number[];
  /** Set by the group: its policy version at the end minus this rollout's oldest turn version (null without turns). */
  staleness?: number | null;
  /** Set by the group: staleness is past staleness.maxStaleness. */
  stale?: boolean;
  /** Attempts restarted at a newer policy version (staleness.onStale restart). */
  staleRestarts?: number;
  /** A branch of another rollout (group.branchOf, group.branching): its parent, the turn it branched at, and how many turns it shares (0: the replay diverged, it started afresh). */
  branch?: { parentRolloutId: string; atTurn: number; sharedTurns: number };
  /** group.branching: the branches this rollout started and theirs, each finished (the group lists them beside it). */
  branches?: RolloutResult[];
  /** group.branching: its advantage within each set of siblings it belongs to (the rollout that branched at a turn and its branches there). */
  siblingAdvantages?: { parentRolloutId: string; atTurn: number; advantage: number | null }[];
}

/** Why a group's branching cannot run as asked (null when it can), for clients and the group workflow alike. */
export function branchingProblem(group: Pick<ResolvedGroupInput, 'branching' | 'attemptOn' | 'groupSize' | 'branchOf'>): string | null {
  const b = group.branching;
  if (!b) return null;
  if (group.attemptOn !== 'workflow') return "branching needs attemptOn 'workflow' (the rollout workflow starts its branches as its children); drop attemptOn 'host' for this group";
  if (group.branchOf) return 'branching and branchOf cannot be combined: branch a tree group\'s rollout with rollout branch after it finished';
  const size = group.groupSize * b.width ** b.atTurns.length;
  if (size > MAX_GROUP_SIZE) return `branching makes ${group.groupSize} x ${b.width}^${b.atTurns.length} = ${size} rollouts, more than ${MAX_GROUP_SIZE} per group; use fewer roots, a smaller width or fewer branch turns`;
  return null;
}

/** Why a group's harness policy cannot run as asked (null when it can): a harness runs whole, so no turn can be taken over or branched. */
export function harnessProblem(group: Pick<ResolvedGroupInput, 'policy' | 'branching' | 'branchOf' | 'failurePolicy'>): string | null {
  if (group.policy.kind !== 'harness') return null;
  const h = group.policy.harness;
  if (group.branching || group.branchOf) return `branching needs the pipeline's own agent loop: ${h} runs whole and cannot be started from another rollout's turn. Fix: drop branching/branchOf, or use policy.kind openai`;
  if (group.failurePolicy.resume === 'replay') return `failurePolicy.resume 'replay' needs the pipeline's own agent loop: ${h} cannot be handed a conversation to continue. Fix: use resume 'restart' for a harness policy`;
  return null;
}

/** `stale`: a rollout's oldest turn was more than staleness.maxStaleness versions behind and onStale is drop_group. */
export type GroupStatus = 'complete' | 'insufficient' | 'task_invalid' | 'failed' | 'stale';

/** Rollouts left out of a baseline (valid: false), counted by outcome class and by `<class>/<type>`. */
export interface MaskedSummary {
  count: number;
  /** count / rollouts; 0 for no rollouts. */
  fraction: number;
  byClass: Record<string, number>;
  byType: Record<string, number>;
  /** failurePolicy.maxMaskedFraction the group ran with (absent in a batch total). */
  maxFraction?: number;
}

export interface GroupResult {
  batchId: string;
  taskId: string;
  taskVersion: string;
  workflowId: string;
  status: GroupStatus;
  /** Why the status is not `complete`. */
  statusReason: string;
  groupSize: number;
  validCount: number;
  meanReward: number | null;
  stdReward: number | null;
  /** What was masked; absent in results of groups that ran before it was counted (maskedSummary(rollouts) recomputes it). */
  masked?: MaskedSummary;
  rollouts: RolloutResult[];
  /** The policy version when the group finished (absent for groups from before versions existed). */
  policyVersion?: number;
}
