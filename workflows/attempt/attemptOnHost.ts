/**
 * An attempt that runs on its sandbox's host (group.attemptOn 'host'), both ends in one file:
 *
 *   the contract   what the rollout hands the attempt workflow (AttemptInput) and what comes back:
 *                  the attempt's report (attemptReport.ts), as the workflow's result when it was
 *                  verified, or encoded into the ApplicationFailure it fails with otherwise
 *                  (attemptFailure), decoded by the rollout (reportOfResult, reportOfFailure)
 *   the host's end `rolloutAttempt`, a workflow on the host's task queue: every policy call and
 *                  tool call, the verdict and the teardown are local activities of the host's
 *                  worker (markers in its history, most of them in one workflow task)
 *   the rollout's end  runAttemptOnHost: starts that workflow as a child on the host's queue and,
 *                  beside it, the watchHost activity (activities/steps/onSandboxHost.ts) that beats while
 *                  the host lives; when the watcher fails first the host is gone, the child is asked
 *                  to cancel and the attempt fails with the watcher's failure (a lost sandbox)
 *
 * A host worker that dies mid-turn loses at most that turn: its workflow task times out, the host's
 * next worker replays the history to the last recorded marker and calls again (a policy step returns
 * its recorded answer, a tool call its recorded result or the command still running).
 *
 * The attempt workflow fails only with ApplicationFailure: any other error would fail its workflow
 * task and retry forever.
 */
import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  ChildWorkflowCancellationType,
  ChildWorkflowFailure,
  executeChild,
  isCancellation,
  ParentClosePolicy,
  setCurrentDetails,
  setHandler,
  TimeoutFailure,
} from '@temporalio/workflow';
import type { ProvisionOutput, RestoredPrefix } from '../../activities/contract.js';
import { hostWatchQueue } from '../../shared/names.js';
import type { RolloutInput } from '../../shared/pipeline.js';
import type { TokenIntegrity } from '../../shared/tokens.js';
import { classifyFailure } from '../classifyFailure.js';
import { policyVersionSignal, rolloutProgressQuery, type RolloutProgress } from '../definitions.js';
import { HEARTBEAT_TIMEOUT } from '../heartbeatTimeout.js';
import { runAgentThenVerify, staleRestartReason } from './agentLoop.js';
import { failedBeforeTurns, type AttemptOutcome, type AttemptReport, type AttemptTimings } from './attemptReport.js';
import { activity, localActivityRunToEnd } from './callActivity.js';
import { hostLocalActivities } from './hostCalls.js';
import { POLICY_RETRY } from './nonRetryable.js';
import { tearDownSandbox } from './sandboxTeardown.js';

// ---- the contract: what goes to the host's attempt workflow and what comes back ----

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
const attemptWorkflowId = (rolloutWorkflowId: string, attempt: number): string => `${rolloutWorkflowId}/attempt-${attempt}`;

/**
 * The failure an attempt workflow fails with for a report that did not end verified: its type the
 * class and type of what ended it (the rollout classifies it as it would the error itself).
 */
function attemptFailure(report: AttemptReport, end: Exclude<AttemptReport['end'], { kind: 'verified' }>): ApplicationFailure {
  const details = (evidence?: string[]): AttemptFailureDetails => ({
    ...(evidence ? { evidence } : {}),
    turns: report.turns,
    loopTurns: report.loopTurns,
    timings: { ...report.timings },
    attemptVersions: report.attemptVersions,
    tokenIntegrity: report.tokenIntegrity,
  });
  if (end.kind === 'stale') return ApplicationFailure.create({ type: STALE_RESTART_FAILURE, message: end.reason, nonRetryable: true, details: [details()] });
  const c = classifyFailure(end.error);
  return ApplicationFailure.create({
    type: `${c.failureClass}/${c.type}`,
    message: c.message,
    nonRetryable: true,
    details: [details(c.evidence)],
    ...(end.error instanceof Error ? { cause: end.error } : {}),
  });
}

/** The report of a verified attempt workflow. */
function reportOfResult(result: AttemptResult): AttemptReport {
  return {
    end: { kind: 'verified', outcome: result.outcome },
    turns: result.outcome.turns,
    loopTurns: result.outcome.turns,
    timings: result.timings,
    attemptVersions: result.attemptVersions,
    tokenIntegrity: result.tokenIntegrity,
    tornDown: true,
  };
}

/** The report of an attempt workflow that failed, or whose host went away (the watcher's failure). */
function reportOfFailure(err: unknown, attempt: number): AttemptReport {
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

// ---- the host's end: the attempt workflow ----

export async function rolloutAttempt(input: AttemptInput): Promise<AttemptResult> {
  const { group, index, attempt, trajectoryRef, sandbox: p } = input;
  const progress: RolloutProgress = { stage: 'agent', attempt, turn: 0, lastAction: '', reward: null };
  setHandler(rolloutProgressQuery, () => ({ ...progress }));
  let policyVersion = input.policyVersion;
  setHandler(policyVersionSignal, (version) => {
    if (version > policyVersion) policyVersion = version;
  });
  const staleness = group.staleness ?? { onStale: 'keep' as const };
  const board = {
    progress,
    show: (): void => {
      const action = progress.lastAction ? ` · ${progress.lastAction}` : '';
      setCurrentDetails(`**${progress.stage}** · rollout ${input.rolloutWorkflowId} · attempt ${attempt + 1} · turn ${progress.turn}${action}`);
    },
  };
  const host = hostLocalActivities(p, group.limits.commandTimeoutSec);

  const report = await runAgentThenVerify({
    group,
    index,
    attempt,
    trajectoryRef,
    sandbox: p,
    policyStep: localActivityRunToEnd('policyStep', { startToCloseTimeout: '5 minutes', localRetryThreshold: '10 seconds', retry: POLICY_RETRY }),
    host,
    versions: { current: () => policyVersion, staleRestartReason: (oldest) => staleRestartReason(staleness, policyVersion, oldest, input.mayRestartStale) },
    board,
    ...(input.resumed ? { resumed: input.resumed } : {}),
  });
  const { end } = report;
  // What the rollout reads of an attempt that did not end verified, as it stood when it ended (before the teardown).
  const failure = end.kind === 'verified' || (end.kind === 'failed' && isCancellation(end.error)) ? undefined : attemptFailure(report, end);
  // ---- teardown: always, also when the rollout cancelled the attempt (unless it followed the verdict) ----
  if (!report.tornDown) {
    progress.stage = 'tearing-down';
    report.timings.teardownMs += await tearDownSandbox(host, p, trajectoryRef, attempt);
  }
  progress.stage = 'done';
  if (end.kind === 'failed' && isCancellation(end.error)) throw end.error;
  if (failure) throw failure;
  if (end.kind !== 'verified') throw new Error('unreachable: an attempt that was not verified has its failure');
  return { outcome: end.outcome, timings: { ...report.timings }, attemptVersions: report.attemptVersions, tokenIntegrity: report.tokenIntegrity };
}

// ---- the rollout's end: start it on the host, watch the host ----

/** Time an attempt may take beyond the agent's budget: its verdict (a local verify is capped at 20 minutes), teardown, retries. */
const ATTEMPT_MARGIN_SEC = 40 * 60;

type Raced = { kind: 'done'; result: AttemptResult } | { kind: 'failed'; error: unknown } | { kind: 'watch-ended'; error?: unknown };

/** Runs the attempt on its sandbox's host; `onRunning` is told the attempt workflow's id once started, and null once it ended. */
export async function runAttemptOnHost(input: AttemptInput, onRunning: (childId: string | null) => void): Promise<AttemptReport> {
  try {
    return reportOfResult(await raceChildAndWatch(input, onRunning));
  } catch (err) {
    return reportOfFailure(err, input.attempt);
  } finally {
    onRunning(null);
  }
}

async function raceChildAndWatch(input: AttemptInput, onStarted: (childId: string) => void): Promise<AttemptResult> {
  const p = input.sandbox;
  const childId = attemptWorkflowId(input.rolloutWorkflowId, input.attempt);
  const budgetSec = p.agentTimeoutSec + ATTEMPT_MARGIN_SEC;
  const watchHost = activity('watchHost', {
    taskQueue: hostWatchQueue(p.hostQueue),
    // Nobody polls the host's watch queue for a minute: the host is gone (as for any call sent to it).
    scheduleToStartTimeout: '1 minute',
    startToCloseTimeout: `${budgetSec} seconds`,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    // A heartbeat that came late, or a restarted worker of the host, takes the watch up again: it ends
    // only when nobody picks it up (the host is gone) or the rollout cancels it.
    retry: { initialInterval: '1 second', maximumInterval: '10 seconds' },
    cancellationType: ActivityCancellationType.TRY_CANCEL,
  });
  const watchScope = new CancellationScope();
  const childScope = new CancellationScope();
  const watching: Promise<Raced> = watchScope
    .run(() => watchHost(`watch host ${p.hostQueue} while ${childId} runs`, { attemptWorkflowId: childId }))
    .then(
      () => ({ kind: 'watch-ended' }),
      (error: unknown) => (isCancellation(error) ? { kind: 'watch-ended', error } : { kind: 'failed', error }),
    );
  const running = childScope.run(() =>
    executeChild<typeof rolloutAttempt>('rolloutAttempt', {
      args: [input],
      workflowId: childId,
      taskQueue: p.hostQueue,
      workflowExecutionTimeout: `${budgetSec} seconds`,
      // A worker that dies mid-turn is noticed after this; the host's next worker replays to the last marker.
      workflowTaskTimeout: '10 seconds',
      // An operator's cancel reaches the attempt, which tears its sandbox down before the rollout goes on.
      cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
      parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
      staticSummary: `attempt ${input.attempt + 1} of rollout ${input.index} on ${p.hostQueue}: sandbox ${p.handle.id}`,
    }),
  );
  onStarted(childId);
  const finished: Promise<Raced> = running.then(
    (result) => ({ kind: 'done', result }),
    (error: unknown) => ({ kind: 'failed', error }),
  );
  let raced = await Promise.race([finished, watching]);
  if (raced.kind === 'watch-ended') raced = await finished; // cancelled with the rollout: the child ends as cancelled too
  else if (raced.kind === 'failed' && !(await isSettled(finished))) {
    // The watcher failed first: the host is gone. Ask the attempt to cancel, without waiting for a host nobody serves.
    childScope.cancel();
    throw raced.error;
  }
  watchScope.cancel();
  await watching;
  if (raced.kind === 'failed') throw raced.error;
  if (raced.kind !== 'done') throw new Error('unreachable: the attempt neither finished nor failed');
  return raced.result;
}

/** Whether a promise has settled already (without waiting for it). */
async function isSettled(promise: Promise<unknown>): Promise<boolean> {
  const pending = Symbol('pending');
  return (await Promise.race([promise.then(() => true), Promise.resolve(pending)])) !== pending;
}
