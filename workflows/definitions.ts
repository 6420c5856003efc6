/**
 * Queries of the pipeline's workflows, declared once and used by workflows,
 * client and tests.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { AttemptSummary } from '../shared/pipeline.js';

export interface RolloutProgress {
  stage: 'starting' | 'provisioning' | 'restoring' | 'agent' | 'verifying' | 'tearing-down' | 'backoff' | 'done';
  attempt: number;
  turn: number;
  lastAction: string;
  reward: number | null;
  /** The attempts that have ended so far, with their failures (absent from rollouts run by older workers). */
  attemptHistory?: AttemptSummary[];
  /**
   * The attempt workflow running the current attempt on its sandbox's host (group.attemptOn 'host'):
   * its own rolloutProgress query has the turn and the last action.
   */
  attemptWorkflowId?: string;
}

export interface GroupProgress {
  total: number;
  finished: number;
  /** Per rollout index, once finished: its reward (null when masked or failed). */
  rewards: (number | null | undefined)[];
}

/** The progress a rollout (or its attempt workflow) shows: the query's answer, and the Web UI's current details once `show` is called. */
export interface ProgressBoard {
  readonly progress: RolloutProgress;
  show(): void;
}

export const rolloutProgressQuery = defineQuery<RolloutProgress>('rolloutProgress');
export const groupProgressQuery = defineQuery<GroupProgress>('groupProgress');

export interface CancelRolloutRequest {
  /** Why the operator cancelled; kept in the rollout's attempt history. */
  reason: string;
}

export interface CancelRolloutResponse {
  /** False when the rollout had already finished. */
  accepted: boolean;
  /** The stage the rollout was in when the update arrived. */
  stage: RolloutProgress['stage'];
  attempt: number;
}

/**
 * Cancels one rollout without touching the rest of its group: the running
 * attempt stops, its sandbox is torn down, and the rollout ends as
 * `cancelled/operator` with no reward (not valid, so outside the group baseline).
 */
export const cancelRolloutUpdate = defineUpdate<CancelRolloutResponse, [CancelRolloutRequest]>('cancelRollout');

export interface AdvancePolicyVersionRequest {
  /** The version of the weights the policy endpoint serves from now on; never lower than the current one. */
  version: number;
}

export interface AdvancePolicyVersionResponse {
  previous: number;
  current: number;
  /** Rollouts of the group still running, told the new version. */
  notified: number;
}

/**
 * The trainer says which weights the policy endpoint serves now (async RL). The
 * group's rollouts record it with every later turn; a version lower than the
 * current one is refused (the update fails, naming both versions).
 */
export const advancePolicyVersionUpdate = defineUpdate<AdvancePolicyVersionResponse, [AdvancePolicyVersionRequest]>('advancePolicyVersion');

/** From a group to its running rollouts: the policy version now served. */
export const policyVersionSignal = defineSignal<[number]>('policyVersion');

/** Why an advancePolicyVersion request is refused, or undefined when it is fine. */
export function policyVersionProblem(request: unknown, current: number): string | undefined {
  const version = typeof request === 'object' && request !== null && 'version' in request ? request.version : undefined;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 0) return `advancePolicyVersion needs {"version": <integer >= 0>}, got ${JSON.stringify(request)}`;
  if (version < current)
    return `policy version ${version} is behind the group's current version ${current}: versions only go forward. Fix: send the version of the weights being served now (>= ${current})`;
  return undefined;
}
