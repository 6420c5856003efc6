/**
 * Queries of the pipeline's workflows, declared once and used by workflows,
 * client and tests.
 */
import { defineQuery } from '@temporalio/workflow';

export interface RolloutProgress {
  stage: 'starting' | 'provisioning' | 'agent' | 'verifying' | 'tearing-down' | 'backoff' | 'done';
  attempt: number;
  turn: number;
  lastAction: string;
  reward: number | null;
}

export interface GroupProgress {
  total: number;
  finished: number;
  /** Per rollout index, once finished: its reward (null when masked or failed). */
  rewards: (number | null | undefined)[];
}

export const rolloutProgressQuery = defineQuery<RolloutProgress>('rolloutProgress');
export const groupProgressQuery = defineQuery<GroupProgress>('groupProgress');
