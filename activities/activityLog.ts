/**
 * The logger an activity writes with: every line carries the workflow id, the
 * rollout index and the attempt, plus the activity's type and its own retry
 * attempt, so one rollout's lines can be found with one filter.
 */
import { Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import { rolloutIndexOfRef } from '../shared/names.js';

export function activityLog(logger: Logger, rollout: { trajectoryRef: string; attempt: number; turn?: number }): Logger {
  const fields: Record<string, unknown> = { rollout: rolloutIndexOfRef(rollout.trajectoryRef), attempt: rollout.attempt };
  if (rollout.turn !== undefined) fields.turn = rollout.turn;
  try {
    const info = Context.current().info;
    Object.assign(fields, { workflowId: info.workflowExecution?.workflowId, runId: info.workflowExecution?.runId, activity: info.activityType, activityAttempt: info.attempt });
  } catch {
    // called outside an activity (the CLI, a test): the rollout fields are still there
  }
  return logger.child(fields);
}
