/**
 * One rollout: one attempt at one task by the policy, retried on a fresh sandbox when
 * infrastructure fails. Each attempt runs top to bottom in attempt/attemptLifecycle.ts (provision,
 * restore, agent loop and verdict, teardown) and returns its report; this workflow decides from
 * the report whether to finish, retry after a backoff, or restart at a newer policy version, and
 * keeps what operators see: the progress query, the Web UI's details, the outcome's search
 * attributes, the store's record.
 *
 * Model failures (max turns, time budget, malformed calls, context overflow) end the agent loop
 * but are still verified and scored. Infra failures end the attempt; a new one starts on a fresh
 * sandbox until retries run out.
 */
import {
  CancellationScope,
  deprecatePatch,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  metricMeter,
  patched,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { AttemptSummary, ExperimentRecord, OutcomeClass, RolloutInput, RolloutResult, StageTimings } from '../shared/pipeline.js';
import type { TokenIntegrity } from '../shared/tokens.js';
import { METRIC } from '../shared/metricNames.js';
import { trajectoryRefOf } from '../shared/names.js';
import { ROLLOUT_ATTEMPTS, ROLLOUT_OUTCOME, ROLLOUT_OUTCOME_CLASS, ROLLOUT_REWARD } from '../shared/searchAttributes.js';
import { classifyFailure } from './classifyFailure.js';
import { HEARTBEAT_TIMEOUT } from './heartbeatTimeout.js';
import { cancelRolloutUpdate, policyVersionSignal, rolloutProgressQuery, type ProgressBoard, type RolloutProgress } from './definitions.js';
import { runAttempt, type LifecycleReport, type RestoreFrom, type RolloutSide } from './attempt/attemptLifecycle.js';
import { noTokens } from './attempt/attemptReport.js';
import { RolloutBranches } from './branches.js';
import { activity, localActivity, localActivityRunToEnd } from './attempt/callActivity.js';
import { POLICY_RETRY } from './attempt/nonRetryable.js';

/** Restarts for staleness per rollout; past this the rollout goes on and is tagged stale. */
const MAX_STALE_RESTARTS = 5;

export async function rollout(input: RolloutInput): Promise<RolloutResult> {
  const { group, index } = input;
  const info = workflowInfo();
  const trajectoryRef = trajectoryRefOf(group.batchId, group.task.id, index);
  const progress: RolloutProgress = { stage: 'starting', attempt: 0, turn: 0, lastAction: '', reward: null };
  const history: AttemptSummary[] = [];
  setHandler(rolloutProgressQuery, () => ({ ...progress, attemptHistory: [...history] }));

  // Async RL: the group tells its rollouts when the policy version advances; every turn records the version it ran under.
  let policyVersion = input.policyVersion ?? group.policyVersion ?? 0;
  setHandler(policyVersionSignal, (version) => {
    if (version <= policyVersion) return;
    policyVersion = version;
    tree?.signalVersion(version);
    // An attempt running on its sandbox's host records its turns' versions itself: pass the news on.
    if (attemptChildId !== null) {
      const child = attemptChildId;
      getExternalWorkflowHandle(child)
        .signal(policyVersionSignal, version)
        .catch((err: unknown) => log.warn('could not pass the policy version on to the attempt', { attempt: child, version, error: String(err) }));
    }
  });
  let staleRestarts = 0;
  /** The last attempt's turn versions and token integrity (the result reports them). */
  let last: { attemptVersions: number[]; tokenIntegrity: TokenIntegrity } = { attemptVersions: [], tokenIntegrity: noTokens(0) };
  /** The attempt workflow running on the sandbox's host (group.attemptOn 'host'), told of new policy versions. */
  let attemptChildId: string | null = null;
  /** failurePolicy.resume 'replay': the attempt whose finished turns the next attempt takes over (null: turn 0). */
  let resumeFrom: number | null = null;
  /** How the running attempt began (taken over turns, or a replay that diverged), for its summary. */
  let attemptResume: Pick<AttemptSummary, 'resumed' | 'divergence'> = {};
  /** A branch (group.branchOf): the parent's turns its current attempt shares, and whether replaying them diverged once. */
  let sharedTurns = 0;
  let branchPrefixDiverged = false;
  /** The rollout whose turns this one shares: a branch started by another rollout (group.branching), or a group of branches (rollout branch). */
  const parentTurns = input.branchOf ?? group.branchOf;
  /** group.branching: the branches this rollout starts at its branch turns (workflows/branches.ts). */
  const tree = group.branching ? new RolloutBranches(input, info.workflowId, trajectoryRef) : null;
  const summarize = (summary: AttemptSummary): void => {
    history.push({ ...summary, ...attemptResume });
  };

  // An operator's cancel stops the running attempt (its scope), never the teardown.
  let cancelReason: string | null = null;
  let attemptScope: CancellationScope | null = null;
  setHandler(
    cancelRolloutUpdate,
    ({ reason }) => {
      const response = { accepted: progress.stage !== 'done' && cancelReason === null, stage: progress.stage, attempt: progress.attempt };
      if (response.accepted) {
        cancelReason = reason;
        log.info('rollout cancelled by operator', { rollout: index, attempt: progress.attempt, reason });
        attemptScope?.cancel();
      }
      return response;
    },
    {
      validator: (request: unknown) => {
        const reason = typeof request === 'object' && request !== null && 'reason' in request ? request.reason : undefined;
        if (typeof reason !== 'string' || reason.trim() === '') throw new Error('cancelRollout needs a reason, e.g. {"reason": "stuck in a loop"}');
      },
    },
  );

  const provisionSandbox = activity('provisionSandbox', {
    taskQueue: group.taskQueues.main,
    startToCloseTimeout: '5 minutes',
    // Heartbeats tell a worker that the workflow stopped waiting, so it tears down what it made.
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    // A failed provision is an infra failure of the attempt; the attempt loop retries on a fresh sandbox.
    retry: { maximumAttempts: 1 },
  });
  // An unavailable endpoint (5xx, 429, refused, timeout) is waited out, never shown to the model.
  const policyRetry = POLICY_RETRY;
  // group.policyCalls 'local': the call runs in this workflow's worker, a marker instead of an activity
  // task and the workflow task that follows it. A worker that dies mid-call is noticed when the workflow
  // task times out; the next worker asks again, or returns the answer if it was recorded (policyStep).
  const policyStep =
    group.policyCalls === 'local' && (deprecatePatch('policy-calls-as-local-activities'), true)
      ? localActivityRunToEnd('policyStep', { startToCloseTimeout: '5 minutes', localRetryThreshold: '10 seconds', retry: policyRetry })
      : activity('policyStep', {
          taskQueue: group.taskQueues.policy,
          startToCloseTimeout: '5 minutes',
          // It heartbeats while the model answers: a policy worker that died or was cut off is noticed in 15 s.
          heartbeatTimeout: HEARTBEAT_TIMEOUT,
          retry: policyRetry,
        });
  const recordRetry = { maximumAttempts: 5, initialInterval: '1 second' };
  const recordRolloutTask = activity('recordRollout', { taskQueue: group.taskQueues.main, startToCloseTimeout: '1 minute', retry: recordRetry });
  // One store write needs no task of its own: a local activity of this worker (rollouts from before run the activity).
  const recordRollout: typeof recordRolloutTask = (summary, ...args) =>
    patched('record-rollout-as-local-activity') ? localActivity('recordRollout', { startToCloseTimeout: '1 minute', retry: recordRetry })(summary, ...args) : recordRolloutTask(summary, ...args);
  /** Live details the Temporal UI shows while the rollout runs. */
  const board: ProgressBoard = {
    progress,
    show: () => {
      const action = progress.lastAction ? ` · ${progress.lastAction}` : '';
      const where = progress.attemptWorkflowId ? ` · on its host: ${progress.attemptWorkflowId}` : '';
      setCurrentDetails(`**${progress.stage}** · attempt ${progress.attempt + 1} · turn ${progress.turn}${action}${where}`);
    },
  };

  // Replay-safe metrics (not emitted while a history is replayed), served by the worker's Prometheus endpoint.
  const stageDuration = metricMeter.createHistogram(METRIC.stageDuration, 'float', 'ms', 'Per-rollout time in each stage');
  const outcomes = metricMeter.createCounter(METRIC.outcomes, undefined, 'Finished rollouts by outcome class and type');
  const attemptFailures = metricMeter.createCounter(METRIC.attemptFailures, undefined, 'Attempts ended by an infra failure');

  const timings: StageTimings = { queueMs: 0, provisionMs: 0, agentMs: 0, verifyMs: 0, teardownMs: 0 };
  let experiment: ExperimentRecord | null = null;
  let totalTurns = 0;
  const side: RolloutSide = {
    input,
    trajectoryRef,
    startedAt: Date.now(),
    board,
    policyVersion: () => policyVersion,
    provisionSandbox,
    policyStep,
    ...(tree ? { beforeTurn: (turn: number, attempt: number) => tree.beforeTurn(turn, attempt, policyVersion) } : {}),
    onHostAttempt: (childId) => {
      attemptChildId = childId;
    },
  };
  /** Adds what an attempt did to the rollout's totals, and keeps its restore's news for the next attempt. */
  const account = (r: LifecycleReport): void => {
    timings.provisionMs += r.provisionMs;
    if (r.queueMs !== undefined) timings.queueMs = r.queueMs;
    timings.agentMs += r.timings.agentMs;
    timings.verifyMs += r.timings.verifyMs;
    timings.teardownMs += r.timings.teardownMs;
    if (r.experiment) experiment = r.experiment;
    totalTurns += r.loopTurns;
    progress.turn = r.turns;
    last = { attemptVersions: r.attemptVersions, tokenIntegrity: r.tokenIntegrity };
    const restore = r.restore;
    if (!restore) return;
    if (restore.resumed) attemptResume.resumed = restore.resumed;
    if (restore.resumed && restore.asBranch) sharedTurns = restore.turns ?? 0;
    if (restore.divergence) {
      // Later attempts do not try those turns again.
      attemptResume.divergence = restore.divergence;
      resumeFrom = null;
      sharedTurns = 0;
      if (restore.asBranch) branchPrefixDiverged = true;
    }
  };
  /** Where the next attempt's turns start: its own earlier attempt's (resume 'replay'), else a branch's parent's, else turn 0. */
  const restoreFrom = (): RestoreFrom => {
    if (resumeFrom !== null && group.failurePolicy.resume === 'replay') return { kind: 'attempt', attempt: resumeFrom };
    sharedTurns = 0;
    return parentTurns && !branchPrefixDiverged ? { kind: 'branch', branchOf: parentTurns } : null;
  };

  const maxAttempts = 1 + group.failurePolicy.infra.retries;
  let result: RolloutResult;
  for (let attempt = 0; ; attempt++) {
    attemptResume = {};
    if (cancelReason !== null) {
      summarize({ attempt, outcomeClass: 'cancelled', outcomeType: 'operator', message: cancelReason, reward: null, turns: progress.turn });
      result = finish(null, false, 'cancelled', 'operator', attempt + 1);
      break;
    }
    const scope = new CancellationScope();
    attemptScope = scope;
    const plan = { attempt, restoreFrom: restoreFrom(), mayRestartStale: staleRestarts < MAX_STALE_RESTARTS };
    const report = await scope.run(() => runAttempt(side, plan));
    account(report);
    const { end } = report;
    if (end.kind === 'verified') {
      const outcome = end.outcome;
      summarize({
        attempt,
        outcomeClass: outcome.outcomeClass,
        outcomeType: outcome.outcomeType,
        message: outcome.message,
        reward: outcome.reward,
        turns: outcome.turns,
        ...(outcome.evidence ? { evidence: outcome.evidence } : {}),
      });
      const valid = outcome.outcomeClass === 'ok' || group.failurePolicy.model === 'score';
      result = finish(outcome.reward, valid, outcome.outcomeClass, outcome.outcomeType, attempt + 1);
      break;
    }
    if (end.kind === 'stale') {
      staleRestarts++;
      // Restarted to sample at the newer version: nothing of this attempt is taken over.
      resumeFrom = null;
      summarize({ attempt, outcomeClass: 'cancelled', outcomeType: 'stale_restart', message: end.reason, reward: null, turns: progress.turn });
      log.info('attempt restarted at a newer policy version', { rollout: index, attempt, message: end.reason });
      continue;
    }
    const err = end.error;
    if (cancelReason !== null && isCancellation(err)) {
      summarize({ attempt, outcomeClass: 'cancelled', outcomeType: 'operator', message: cancelReason, reward: null, turns: progress.turn });
      result = finish(null, false, 'cancelled', 'operator', attempt + 1);
      break;
    }
    if (isCancellation(err)) throw err;
    const c = classifyFailure(err);
    // Failure attribution (verifier/attribution/) laid the end on the agent: it made verification
    // impossible. Scored as a failed attempt, never retried, never masked unless the policy masks model.
    if (c.failureClass === 'model' && (deprecatePatch('attributed-model-failures'), true)) {
      const reward = group.failurePolicy.failedAttemptReward ?? 0;
      summarize({ attempt, outcomeClass: 'model', outcomeType: c.type, message: c.message, reward, turns: progress.turn, ...(c.evidence ? { evidence: c.evidence } : {}) });
      log.warn('attempt failed: attributed to the agent', { rollout: index, attempt, type: c.type, message: c.message, evidence: c.evidence });
      progress.reward = reward;
      result = finish(reward, group.failurePolicy.model === 'score', 'model', c.type, attempt + 1, c.evidence);
      break;
    }
    summarize({ attempt, outcomeClass: c.failureClass, outcomeType: c.type, message: c.message, reward: null, turns: progress.turn, ...(c.evidence ? { evidence: c.evidence } : {}) });
    log.warn('attempt failed', { rollout: index, attempt, failureClass: c.failureClass, type: c.type, message: c.message });
    if (c.failureClass === 'infra') attemptFailures.add(1, { outcome_type: c.type });
    if (c.failureClass === 'infra' && attempt - staleRestarts + 1 < maxAttempts) {
      // The next attempt goes on where this one stopped (an attempt that recorded nothing leaves the source as it was).
      if (group.failurePolicy.resume === 'replay' && report.reachedAgent) resumeFrom = attempt;
      progress.stage = 'backoff';
      const backoff = new CancellationScope();
      attemptScope = backoff;
      // A cancel during the backoff ends the wait; the next turn of the loop sees cancelReason.
      await backoff.run(() => sleep(group.failurePolicy.infra.backoffSec * 1000 * 2 ** (attempt - staleRestarts))).catch((e: unknown) => {
        if (!(cancelReason !== null && isCancellation(e))) throw e;
      });
      continue;
    }
    if (c.failureClass === 'infra' && group.failurePolicy.infra.onExhausted === 'score') result = finish(0, true, c.failureClass, c.type, attempt + 1, c.evidence);
    else result = finish(null, false, c.failureClass, c.type, attempt + 1, c.evidence);
    break;
  }
  // group.branching: the branches this rollout started go on beside it; it returns once they all have.
  const branches = tree ? await tree.results() : [];
  // Rollouts started before this step existed replay without it (patched() is false for them).
  if (patched('record-rollout-in-store')) {
    await CancellationScope.nonCancellable(() =>
      recordRollout(`record outcome ${result.outcomeClass}/${result.outcomeType}`, { batchId: group.batchId, taskId: group.task.id, taskVersion: group.task.version, result }).catch((err: unknown) => {
        // The result itself is in the workflow's history either way; the store copy is for queries.
        log.warn('could not record the rollout in the store', { rollout: index, error: String(err) });
      }),
    );
  }
  return branches.length > 0 ? { ...result, branches } : result;

  function finish(reward: number | null, valid: boolean, outcomeClass: OutcomeClass, outcomeType: string, attempts: number, evidence?: string[]): RolloutResult {
    progress.stage = 'done';
    outcomes.add(1, { outcome_class: outcomeClass, outcome_type: outcomeType });
    for (const [stage, ms] of [['queue', timings.queueMs], ['provision', timings.provisionMs], ['agent', timings.agentMs], ['verify', timings.verifyMs], ['teardown', timings.teardownMs]] as const) {
      if (ms > 0 || stage === 'queue') stageDuration.record(ms, { stage });
    }
    const why = evidence && evidence.length > 0 ? `\n\n**evidence**\n${evidence.map((e) => `- ${e}`).join('\n')}` : '';
    setCurrentDetails(`**done** · ${outcomeClass}/${outcomeType} · reward ${reward ?? 'none'} · ${attempts} attempt${attempts === 1 ? '' : 's'}${valid ? '' : ' · masked'}${why}`);
    upsertSearchAttributes([
      { key: ROLLOUT_OUTCOME, value: outcomeType },
      { key: ROLLOUT_OUTCOME_CLASS, value: outcomeClass },
      { key: ROLLOUT_ATTEMPTS, value: attempts },
      ...(reward !== null ? [{ key: ROLLOUT_REWARD, value: reward }] : []),
    ]);
    return {
      index,
      workflowId: info.workflowId,
      reward,
      advantage: null,
      valid,
      outcomeClass,
      outcomeType,
      attempts,
      attemptHistory: history,
      turns: totalTurns,
      timings,
      trajectoryRef,
      experiment,
      tokenIntegrity: last.tokenIntegrity,
      policyVersions: last.attemptVersions,
      ...(staleRestarts > 0 ? { staleRestarts } : {}),
      ...(parentTurns ? { branch: { parentRolloutId: parentTurns.rolloutWorkflowId, atTurn: parentTurns.atTurn, sharedTurns } } : {}),
    };
  }
}
