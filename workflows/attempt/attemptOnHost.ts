/**
 * The rollout's side of an attempt that runs on its sandbox's host (group.attemptOn 'host'): start
 * the attempt workflow as a child on the host's task queue, and beside it an activity on the same
 * queue that heartbeats while the host lives (activities/watchHost.ts). The child's result is the
 * attempt's; when the watcher fails (its heartbeats stopped and no worker of the host took it up
 * again, or no worker picked it up at all) the host is gone: the child is asked to cancel and the
 * attempt fails with the watcher's failure, which the rollout classifies as a lost sandbox. Either
 * way it returns the attempt's report, as the rollout's own agent loop does.
 */
import { ActivityCancellationType, CancellationScope, ChildWorkflowCancellationType, executeChild, isCancellation, ParentClosePolicy } from '@temporalio/workflow';
import { hostWatchQueue } from '../../shared/names.js';
import { HEARTBEAT_TIMEOUT } from '../heartbeatTimeout.js';
import type { AttemptReport } from './attemptReport.js';
import { attemptWorkflowId, reportOfFailure, reportOfResult, type AttemptInput, type AttemptResult } from './attemptWorkflow.js';
import { activity } from './callActivity.js';
import type { rolloutAttempt } from './rolloutAttempt.js';

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
