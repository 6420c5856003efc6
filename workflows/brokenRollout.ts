/**
 * The result that stands for a rollout whose workflow failed as a whole (it never returned one): no
 * reward, invalid, the failure's class and message as its only attempt. Written by the group for its
 * rollouts and by a rollout for the branches it started.
 */
import type { RolloutResult } from '../shared/pipeline.js';
import { classifyFailure } from './classifyFailure.js';

export function brokenRollout(where: { batchId: string; taskId: string; index: number; workflowId: string }, err: unknown): RolloutResult {
  const c = classifyFailure(err);
  return {
    index: where.index,
    workflowId: where.workflowId,
    reward: null,
    advantage: null,
    valid: false,
    outcomeClass: c.failureClass,
    outcomeType: c.type,
    attempts: 0,
    attemptHistory: [{ attempt: 0, outcomeClass: c.failureClass, outcomeType: c.type, message: c.message, reward: null, turns: 0 }],
    turns: 0,
    timings: { queueMs: 0, provisionMs: 0, agentMs: 0, verifyMs: 0, teardownMs: 0 },
    trajectoryRef: `${where.batchId}/${where.taskId}/${where.index}`,
    experiment: null,
  };
}
