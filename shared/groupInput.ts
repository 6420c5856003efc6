/**
 * What the trainer submits for one GRPO group: the task, the group size, limits, the failure policy,
 * staleness, branching; and why a group cannot run as asked. Part of the pipeline contract (shared/pipeline.ts).
 */
import { z } from 'zod';
import { TASK_QUEUES } from './names.js';
import { TaskRefSchema, TaskRequestSchema } from './task.js';
import { PolicyConfigSchema } from './policyConfig.js';

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
export const DEFAULT_FAILURE_POLICY: FailurePolicy = {
  infra: { retries: 2, backoffSec: 1, onExhausted: 'mask' },
  model: 'score',
  task: 'fail_group',
  resume: 'restart',
  failedAttemptReward: 0,
  maxMaskedFraction: 0.5,
};
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

/** Why a group's branching cannot run as asked (null when it can), for clients and the group workflow alike. */
export function branchingProblem(group: Pick<ResolvedGroupInput, 'branching' | 'attemptOn' | 'groupSize' | 'branchOf'>): string | null {
  const b = group.branching;
  if (!b) return null;
  if (group.attemptOn !== 'workflow') return "branching needs attemptOn 'workflow' (the rollout workflow starts its branches as its children); drop attemptOn 'host' for this group";
  if (group.branchOf) return 'branching and branchOf cannot be combined: branch a tree group\'s rollout with rollout branch after it finished';
  const size = group.groupSize * b.width ** b.atTurns.length;
  if (size > MAX_GROUP_SIZE)
    return `branching makes ${group.groupSize} x ${b.width}^${b.atTurns.length} = ${size} rollouts, more than ${MAX_GROUP_SIZE} per group; use fewer roots, a smaller width or fewer branch turns`;
  return null;
}

/** Why a group's harness policy cannot run as asked (null when it can): a harness runs whole, so no turn can be taken over or branched. */
export function harnessProblem(group: Pick<ResolvedGroupInput, 'policy' | 'branching' | 'branchOf' | 'failurePolicy'>): string | null {
  if (group.policy.kind !== 'harness') return null;
  const h = group.policy.harness;
  if (group.branching || group.branchOf)
    return `branching needs the pipeline's own agent loop: ${h} runs whole and cannot be started from another rollout's turn. Fix: drop branching/branchOf, or use policy.kind openai`;
  if (group.failurePolicy.resume === 'replay')
    return `failurePolicy.resume 'replay' needs the pipeline's own agent loop: ${h} cannot be handed a conversation to continue. Fix: use resume 'restart' for a harness policy`;
  return null;
}
