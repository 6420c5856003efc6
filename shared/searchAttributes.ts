/**
 * The custom search attributes of rollout-pipeline, declared once.
 *
 * Workflows upsert them, the client queries them, and the dev-server script
 * registers them (`temporal server start-dev --search-attribute Name=Type`), so
 * `temporal workflow list --query 'RolloutBatch="b1" AND RolloutOutcomeClass="infra"'`
 * works on any server started through this project.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const ROLLOUT_BATCH = defineSearchAttributeKey('RolloutBatch', SearchAttributeType.KEYWORD);
export const ROLLOUT_TASK_ID = defineSearchAttributeKey('RolloutTaskId', SearchAttributeType.KEYWORD);
export const ROLLOUT_TASK_VERSION = defineSearchAttributeKey('RolloutTaskVersion', SearchAttributeType.KEYWORD);
export const ROLLOUT_OUTCOME = defineSearchAttributeKey('RolloutOutcome', SearchAttributeType.KEYWORD);
export const ROLLOUT_OUTCOME_CLASS = defineSearchAttributeKey('RolloutOutcomeClass', SearchAttributeType.KEYWORD);
export const ROLLOUT_ATTEMPTS = defineSearchAttributeKey('RolloutAttempts', SearchAttributeType.INT);
export const ROLLOUT_REWARD = defineSearchAttributeKey('RolloutReward', SearchAttributeType.DOUBLE);

export const ROLLOUT_SEARCH_ATTRIBUTES = [
  ROLLOUT_BATCH,
  ROLLOUT_TASK_ID,
  ROLLOUT_TASK_VERSION,
  ROLLOUT_OUTCOME,
  ROLLOUT_OUTCOME_CLASS,
  ROLLOUT_ATTEMPTS,
  ROLLOUT_REWARD,
] as const;
