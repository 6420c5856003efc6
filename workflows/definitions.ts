/**
 * Queries of the pipeline's workflows, declared once and used by workflows,
 * client and tests.
 */
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { AttemptSummary } from '../shared/pipeline.js';

export interface RolloutProgress {
  stage: 'starting' | 'provisioning' | 'agent' | 'verifying' | 'tearing-down' | 'backoff' | 'done';
  attempt: number;
  turn: number;
  lastAction: string;
  reward: number | null;
  /** The attempts that have ended so far, with their failures (absent from rollouts run by older workers). */
  attemptHistory?: AttemptSummary[];
}

export interface GroupProgress {
  total: number;
  finished: number;
  /** Per rollout index, once finished: its reward (null when masked or failed). */
  rewards: (number | null | undefined)[];
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
