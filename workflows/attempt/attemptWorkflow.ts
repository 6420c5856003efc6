/**
 * What a rollout hands the attempt workflow it starts on its sandbox's host (group.attemptOn
 * 'host'), and what comes back: the attempt's report (attemptReport.ts), as the workflow's result
 * when it was verified, or inside the failure it fails with otherwise. Both ends of that failure
 * are here: the attempt workflow encodes its report into it, the rollout decodes the same report.
 */
import { ApplicationFailure, ChildWorkflowFailure, TimeoutFailure } from '@temporalio/workflow';
import type { ProvisionOutput, RestoredPrefix } from '../../activities/contract.js';
import type { RolloutInput } from '../../shared/pipeline.js';
import type { TokenIntegrity } from '../../shared/tokens.js';
import { classifyFailure } from '../classifyFailure.js';
import { failedBeforeTurns, type AttemptOutcome, type AttemptReport, type AttemptTimings } from './attemptReport.js';

export interface AttemptInput {
  group: RolloutInput['group'];
  index: number;
  attempt: number;
  trajectoryRef: string;
  sandbox: ProvisionOutput;
  /** The policy version when the attempt starts; the rollout signals later ones on (policyVersion). */
  policyVersion: number;
  /** Whether a staleness restart is still allowed (the rollout counts them). */
  mayRestartStale: boolean;
  /** The rollout this attempt belongs to (its workflow id), for logs and the Web UI. */
  rolloutWorkflowId: string;
  /** Turns the rollout restored into this attempt's sandbox (failurePolicy.resume 'replay'): the loop goes on after them. */
  resumed?: RestoredPrefix;
}

/** The attempt workflow's result: a verified attempt (its sandbox is torn down). */
export interface AttemptResult {
  outcome: AttemptOutcome;
  timings: AttemptTimings;
  attemptVersions: number[];
  tokenIntegrity: TokenIntegrity;
}

/** details[0] of the ApplicationFailure an attempt workflow fails with. */
interface AttemptFailureDetails {
  /** Failure attribution's findings, when it ran (classifyFailure reads them from here). */
  evidence?: string[];
  /** Turns the attempt had finished when it failed. */
  turns: number;
  /** Turns of an agent loop that had ended (0 when the failure came during the loop). */
  loopTurns: number;
  timings: AttemptTimings;
  attemptVersions: number[];
  tokenIntegrity: TokenIntegrity;
}

/** The failure type of an attempt that stopped to restart at a newer policy version. */
const STALE_RESTART_FAILURE = 'attempt/stale_restart';

/** The attempt workflow's id: one per attempt of a rollout. */
export const attemptWorkflowId = (rolloutWorkflowId: string, attempt: number): string => `${rolloutWorkflowId}/attempt-${attempt}`;

/**
 * The failure an attempt workflow fails with for a report that did not end verified: its type the
 * class and type of what ended it (the rollout classifies it as it would the error itself).
 */
export function attemptFailure(report: AttemptReport, end: Exclude<AttemptReport['end'], { kind: 'verified' }>): ApplicationFailure {
  const details = (evidence?: string[]): AttemptFailureDetails => ({ ...(evidence ? { evidence } : {}), turns: report.turns, loopTurns: report.loopTurns, timings: { ...report.timings }, attemptVersions: report.attemptVersions, tokenIntegrity: report.tokenIntegrity });
  if (end.kind === 'stale') return ApplicationFailure.create({ type: STALE_RESTART_FAILURE, message: end.reason, nonRetryable: true, details: [details()] });
  const c = classifyFailure(end.error);
  return ApplicationFailure.create({ type: `${c.failureClass}/${c.type}`, message: c.message, nonRetryable: true, details: [details(c.evidence)], ...(end.error instanceof Error ? { cause: end.error } : {}) });
}

/** The report of a verified attempt workflow. */
export function reportOfResult(result: AttemptResult): AttemptReport {
  return { end: { kind: 'verified', outcome: result.outcome }, turns: result.outcome.turns, loopTurns: result.outcome.turns, timings: result.timings, attemptVersions: result.attemptVersions, tokenIntegrity: result.tokenIntegrity, tornDown: true };
}

/** The report of an attempt workflow that failed, or whose host went away (the watcher's failure). */
export function reportOfFailure(err: unknown, attempt: number): AttemptReport {
  const cause = err instanceof ChildWorkflowFailure ? err.cause : undefined;
  // An attempt workflow that ran to its end (failed or cancelled) tore its sandbox down; one that timed out,
  // never started or whose host is gone did not (the rollout tears it down then).
  const tornDown = err instanceof ChildWorkflowFailure && !(cause instanceof TimeoutFailure);
  const end = cause instanceof ApplicationFailure && cause.type === STALE_RESTART_FAILURE ? { kind: 'stale' as const, reason: cause.message } : { kind: 'failed' as const, error: err };
  const first: unknown = cause instanceof ApplicationFailure ? cause.details?.[0] : undefined;
  if (!isAttemptFailureDetails(first)) return { ...failedBeforeTurns(attempt, err), end, tornDown };
  return { end, turns: first.turns, loopTurns: first.loopTurns, timings: first.timings, attemptVersions: first.attemptVersions, tokenIntegrity: first.tokenIntegrity, tornDown };
}

function isAttemptFailureDetails(value: unknown): value is AttemptFailureDetails {
  return typeof value === 'object' && value !== null && 'turns' in value && typeof value.turns === 'number' && 'attemptVersions' in value && Array.isArray(value.attemptVersions);
}
