/**
 * Turns whatever ended an attempt into the failure taxonomy's class and type.
 * Activities throw errors named `<class>/<type>`; timeouts of a host's queue
 * mean the host (and so the sandbox) is gone.
 */
import { TimeoutType } from '@temporalio/common';
import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure, TimeoutFailure } from '@temporalio/workflow';
import { parseFailureName, type Failure } from '../shared/failures.js';

/** A failure of the taxonomy: its type is checked against its class (shared/failures.ts). */
export type Classified = Failure;

/** The evidence an activity attached to its failure (details[0].evidence), if any. */
function evidenceOf(failure: ApplicationFailure): { evidence?: string[] } {
  const first: unknown = failure.details?.[0];
  if (typeof first !== 'object' || first === null || !('evidence' in first) || !Array.isArray(first.evidence)) return {};
  return { evidence: first.evidence.filter((e): e is string => typeof e === 'string') };
}

export function classifyFailure(err: unknown): Classified {
  // An attempt that ran as a workflow on its sandbox's host (group.attemptOn 'host') fails with the
  // class and type of what ended it (workflows/attempt/attemptOnHost.ts).
  if (err instanceof ChildWorkflowFailure) {
    if (err.cause instanceof ApplicationFailure || err.cause instanceof ActivityFailure) return classifyFailure(err.cause);
    if (err.cause instanceof TimeoutFailure) return { failureClass: 'infra', type: 'worker_lost', message: `attempt workflow ${err.execution.workflowId} ran out of time (its host may be gone)` };
    return { failureClass: 'infra', type: 'exec_transport', message: `attempt workflow ${err.execution.workflowId} failed: ${err.cause?.message ?? err.message}` };
  }
  if (err instanceof ActivityFailure) {
    const cause = err.cause;
    if (cause instanceof ApplicationFailure) {
      const parsed = parseFailureName(cause.type ?? '');
      if (parsed) return { ...parsed, message: cause.message, ...evidenceOf(cause) };
      return { failureClass: 'infra', type: 'exec_transport', message: `${err.activityType} failed: ${cause.type ?? 'Error'}: ${cause.message}` };
    }
    if (cause instanceof TimeoutFailure) {
      const kind = cause.timeoutType === TimeoutType.SCHEDULE_TO_START ? 'no worker picked it up (its host is gone)' : 'it ran out of time (its worker may be gone)';
      return { failureClass: 'infra', type: cause.timeoutType === TimeoutType.SCHEDULE_TO_START ? 'sandbox_lost' : 'worker_lost', message: `${err.activityType}: ${kind}` };
    }
    return { failureClass: 'infra', type: 'exec_transport', message: `${err.activityType} failed: ${cause?.message ?? err.message}` };
  }
  if (err instanceof ApplicationFailure) {
    const parsed = parseFailureName(err.type ?? '');
    if (parsed) return { ...parsed, message: err.message, ...evidenceOf(err) };
  }
  return { failureClass: 'infra', type: 'exec_transport', message: err instanceof Error ? err.message : String(err) };
}

/**
 * A host-pinned activity nobody picked up within its schedule-to-start timeout: the sandbox's
 * host has no worker polling (it died and did not come back in time). Anything else sent to
 * that host would wait out the same timeout.
 */
export function hostUnreachable(err: unknown): boolean {
  return err instanceof ActivityFailure && err.cause instanceof TimeoutFailure && err.cause.timeoutType === TimeoutType.SCHEDULE_TO_START;
}
