/**
 * What each rollout workflow is given and returns, the experiment record that makes every reward
 * reproducible, and each group's result. Part of the pipeline contract (shared/pipeline.ts).
 */
import type { z } from 'zod';
import type { FailureClass } from './failures.js';
import type { TaskNetwork } from './task.js';
import type { TokenIntegrity } from './tokens.js';
import type { BranchOf, FailurePolicy, ResolvedGroupInput, RolloutLimits, VerifyModeSchema } from './groupInput.js';
import type { ResolvedPolicyConfig } from './policyConfig.js';

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
