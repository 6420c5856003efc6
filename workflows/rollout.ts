/**
 * One rollout: one attempt at one task by the policy, retried on a fresh
 * sandbox when infrastructure fails. An attempt reads top to bottom:
 *
 *   provision sandbox           (main queue; the sandbox's host is returned)
 *   agent loop, in the workflow (each policy call and each tool call is its own activity)
 *   verify -> reward            (on the sandbox's host)
 *   teardown                    (on the sandbox's host, nonCancellable, in finally)
 *
 * With group.attemptOn 'host' the agent loop, verify and teardown run instead in an attempt
 * workflow on the sandbox's host (workflows/attempt/rolloutAttempt.ts), each call a local
 * activity there: about a quarter of the server round trips per rollout.
 *
 * Model failures (max turns, time budget, malformed calls, context overflow)
 * end the agent loop but are still verified and scored. Infra failures end
 * the attempt; a new one starts on a fresh sandbox until retries run out.
 */
import { ApplicationFailure, CancellationScope, ChildWorkflowFailure, getExternalWorkflowHandle, isCancellation, log, metricMeter, patched, setCurrentDetails, setHandler, sleep, TimeoutFailure, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { AttemptSummary, ExperimentRecord, OutcomeClass, RolloutInput, RolloutResult, StageTimings } from '../shared/pipeline.js';
import { policyLabel } from '../shared/policyLabel.js';
import { METRIC } from '../shared/metricNames.js';
import { trajectoryRefOf } from '../shared/names.js';
import { ROLLOUT_ATTEMPTS, ROLLOUT_OUTCOME, ROLLOUT_OUTCOME_CLASS, ROLLOUT_REWARD } from '../shared/searchAttributes.js';
import { classifyFailure, hostUnreachable } from './classifyFailure.js';
import { HEARTBEAT_TIMEOUT } from './heartbeatTimeout.js';
import { cancelRolloutUpdate, policyVersionSignal, rolloutProgressQuery, type RolloutProgress } from './definitions.js';
import { freshAttemptState, runAgentThenVerify, StaleRestart, staleRestartReason, type AttemptOutcome, type AttemptState } from './attempt/agentLoop.js';
import { runAttemptOnHost } from './attempt/attemptOnHost.js';
import { RolloutBranches } from './branches.js';
import { isAttemptFailureDetails, STALE_RESTART_FAILURE, type AttemptFailureDetails, type AttemptResult, type AttemptTimings } from './attempt/attemptWorkflow.js';
import { activity, localActivity, localActivityRunToEnd } from './attempt/callActivity.js';
import { hostActivities } from './attempt/hostCalls.js';
import type { ProvisionOutput } from '../activities/contract.js';
import type { RestoredPrefix } from '../activities/contract.js';
import { POLICY_RETRY } from './attempt/nonRetryable.js';

/** Thrown instead of starting an attempt once an operator cancelled the rollout. */
class CancelledByOperator extends Error {}

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
  const staleness = group.staleness ?? { onStale: 'keep' as const };
  let staleRestarts = 0;
  /** The running (or last) attempt's turn versions, token integrity and whether its sandbox is torn down. */
  let attemptState: AttemptState = freshAttemptState(0);
  /** The attempt workflow running on the sandbox's host (group.attemptOn 'host'), told of new policy versions. */
  let attemptChildId: string | null = null;
  /** failurePolicy.resume 'replay': the attempt whose finished turns the next attempt takes over (null: turn 0). */
  let resumeFrom: number | null = null;
  /** How the running attempt began (taken over turns, or a replay that diverged), for its summary. */
  let attemptResume: Pick<AttemptSummary, 'resumed' | 'divergence'> = {};
  /** The running attempt got past provisioning (and restoring): it may have recorded turns. */
  let reachedAgent = false;
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
    group.policyCalls === 'local' && patched('policy-calls-as-local-activities')
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
  const policyName = policyLabel(group.policy);
  /** Live details the Temporal UI shows while the rollout runs. */
  const showProgress = (): void => {
    const action = progress.lastAction ? ` · ${progress.lastAction}` : '';
    const where = progress.attemptWorkflowId ? ` · on its host: ${progress.attemptWorkflowId}` : '';
    setCurrentDetails(`**${progress.stage}** · attempt ${progress.attempt + 1} · turn ${progress.turn}${action}${where}`);
  };

  // Replay-safe metrics (not emitted while a history is replayed), served by the worker's Prometheus endpoint.
  const stageDuration = metricMeter.createHistogram(METRIC.stageDuration, 'float', 'ms', 'Per-rollout time in each stage');
  const outcomes = metricMeter.createCounter(METRIC.outcomes, undefined, 'Finished rollouts by outcome class and type');
  const attemptFailures = metricMeter.createCounter(METRIC.attemptFailures, undefined, 'Attempts ended by an infra failure');

  const timings: StageTimings = { queueMs: 0, provisionMs: 0, agentMs: 0, verifyMs: 0, teardownMs: 0 };
  const startedAt = Date.now();
  let experiment: ExperimentRecord | null = null;
  let totalTurns = 0;
  const addTimings = (t: AttemptTimings): void => {
    timings.agentMs += t.agentMs;
    timings.verifyMs += t.verifyMs;
    timings.teardownMs += t.teardownMs;
  };

  async function runAttempt(attempt: number): Promise<AttemptOutcome> {
    progress.stage = 'provisioning';
    progress.attempt = attempt;
    progress.turn = 0;
    delete progress.attemptWorkflowId;
    attemptState = freshAttemptState(attempt);
    showProgress();
    const provision = async (fresh: boolean): Promise<ProvisionOutput> => {
      const out = await provisionSandbox(`provision ${fresh ? 'fresh ' : ''}local sandbox (attempt ${attempt + 1})`, { group, workflowId: info.workflowId, runId: info.runId, index, attempt, trajectoryRef });
      timings.provisionMs += out.provisionMs;
      // Queue: from the rollout's start until a worker had its first sandbox, less the provisioning itself.
      if (attempt === 0 && !fresh) timings.queueMs = Math.max(0, Date.now() - startedAt - out.provisionMs);
      // The build that runs this workflow (Worker Versioning pins it to the one it started on); replay-safe.
      const version = workflowInfo().currentDeploymentVersion;
      // An unversioned worker reports no deployment (its SDK-made build id has an empty deployment name): null.
      experiment = { ...out.experiment, workerBuild: version?.deploymentName ? { deploymentName: version.deploymentName, buildId: version.buildId } : null };
      return out;
    };
    let p = await provision(attempt !== 0);
    let host = hostActivities(p, group.limits.commandTimeoutSec);
    let hostGone = false;
    const state = attemptState;
    const mayRestartStale = staleRestarts < MAX_STALE_RESTARTS;

    try {
      // ---- resume (failurePolicy.resume 'replay'): the earlier attempt's finished turns, replayed into this sandbox ----
      // A branch's attempts start from its parent's turns, unless one of its own attempts is resumed.
      let resumed: RestoredPrefix | undefined;
      const ownTurns = resumeFrom !== null && group.failurePolicy.resume === 'replay' ? resumeFrom : null;
      const branchOf = ownTurns === null && parentTurns && !branchPrefixDiverged ? parentTurns : undefined;
      sharedTurns = ownTurns !== null ? sharedTurns : 0;
      if (ownTurns !== null || branchOf) {
        const from = ownTurns ?? branchOf?.attempt ?? 0;
        progress.stage = 'restoring';
        showProgress();
        const what = branchOf ? `turns 0-${branchOf.atTurn - 1} of ${branchOf.rolloutWorkflowId}` : `the turns of attempt ${from + 1}`;
        const restored = await host.restoreTurns(`restore ${what} by replay into sandbox ${p.handle.id}`, {
          handle: p.handle,
          trajectoryRef,
          fromAttempt: from,
          toAttempt: attempt,
          workdir: p.workdir,
          commandTimeoutSec: group.limits.commandTimeoutSec,
          maxOutputBytes: group.limits.maxOutputBytes,
          scripted: group.policy.kind === 'scripted',
          ...(branchOf ? { branchOf: { rolloutWorkflowId: branchOf.rolloutWorkflowId, trajectoryRef: branchOf.trajectoryRef, turns: branchOf.atTurn } } : {}),
        });
        if (restored.status === 'restored') {
          resumed = restored.prefix;
          const x = restored.prefix;
          attemptResume.resumed = { ...(x.fromRollout !== undefined ? { fromRollout: x.fromRollout } : {}), fromAttempt: x.fromAttempt, turns: x.turns, nextTurnAnswered: x.nextTurnAnswered, method: x.method, replayedCalls: x.replayedCalls, replayMs: x.replayMs, stateChecked: x.stateChecked, drift: x.drift };
          if (branchOf) sharedTurns = x.turns;
        } else if (restored.status === 'diverged') {
          // Not the same environment: nothing is taken over, and a sandbox holding part of a replay is no
          // start for turn 0. Later attempts do not try those turns again.
          attemptResume.divergence = restored.divergence;
          resumeFrom = null;
          sharedTurns = 0;
          if (branchOf) branchPrefixDiverged = true;
          log.warn('the replay diverged: the attempt starts at turn 0 on a fresh sandbox', { rollout: index, attempt, divergence: restored.divergence });
          await tearDown();
          p = await provision(true);
          host = hostActivities(p, group.limits.commandTimeoutSec);
        }
      }
      // From here on the attempt may record turns: a later attempt can take them over.
      reachedAgent = true;
      // group.attemptOn 'host': the attempt runs as a workflow on the sandbox's host, its calls local there.
      if (group.attemptOn === 'host' && patched('attempt-as-child-on-host-queue')) {
        progress.stage = 'agent';
        showProgress();
        let done: AttemptResult;
        try {
          done = await runAttemptOnHost({ group, index, attempt, trajectoryRef, sandbox: p, policyVersion, mayRestartStale, rolloutWorkflowId: info.workflowId, ...(resumed ? { resumed } : {}) }, (childId) => {
            attemptChildId = childId;
            progress.attemptWorkflowId = childId;
            showProgress();
          });
        } catch (err) {
          const details = err instanceof ChildWorkflowFailure && err.cause instanceof ApplicationFailure ? attemptFailureDetails(err.cause) : undefined;
          if (details) {
            Object.assign(state, { attemptVersions: details.attemptVersions, tokenIntegrity: details.tokenIntegrity });
            addTimings(details.timings);
            progress.turn = details.turns;
            totalTurns += details.loopTurns;
          }
          // An attempt workflow that ran to its end (failed or cancelled) tore its sandbox down; one that timed out,
          // never started or whose host is gone did not (the rollout schedules the teardown then).
          state.tornDown = err instanceof ChildWorkflowFailure && !(err.cause instanceof TimeoutFailure);
          if (err instanceof ChildWorkflowFailure && err.cause instanceof ApplicationFailure && err.cause.type === STALE_RESTART_FAILURE) throw new StaleRestart(err.cause.message);
          throw err;
        } finally {
          attemptChildId = null;
        }
        Object.assign(state, { attemptVersions: done.attemptVersions, tokenIntegrity: done.tokenIntegrity, tornDown: true });
        addTimings(done.timings);
        totalTurns += done.outcome.turns;
        progress.turn = done.outcome.turns;
        progress.reward = done.outcome.reward;
        return done.outcome;
      }
      return await runAgentThenVerify({
        group,
        index,
        attempt,
        trajectoryRef,
        sandbox: p,
        policyName,
        policyStep,
        host,
        policyVersion: () => policyVersion,
        staleRestartReason: (oldest) => staleRestartReason(staleness, policyVersion, oldest, mayRestartStale),
        progress,
        showProgress,
        timings,
        onTurnsDone: (turns) => {
          totalTurns += turns;
        },
        state,
        ...(resumed ? { resumed } : {}),
        ...(tree ? { beforeTurn: (turn: number) => tree.beforeTurn(turn, attempt, policyVersion) } : {}),
      });
    } catch (err) {
      hostGone = hostUnreachable(err);
      throw err;
    } finally {
      // ---- teardown: always, even when the rollout is cancelled (unless it followed the verdict) ----
      if (!state.tornDown) await tearDown();
    }

    async function tearDown(): Promise<void> {
      progress.stage = 'tearing-down';
      const teardown = CancellationScope.nonCancellable(async () => {
        try {
          timings.teardownMs += (await host.teardown(`teardown sandbox ${p.handle.id}`, { handle: p.handle, trajectoryRef, attempt })).teardownMs;
        } catch (err) {
          // The host is gone or teardown kept failing: the reaper removes the sandbox from its record.
          log.warn('teardown failed; the reaper will remove the sandbox', { sandbox: p.handle.id, error: String(err) });
        }
      });
      // A host nobody polls would leave the teardown waiting out the same schedule-to-start minute before
      // the next attempt could start. It is still scheduled (a host back in time runs it; else its reaper
      // does the work when it returns), but the next attempt on another host does not wait for it.
      if (hostGone && patched('next-attempt-does-not-wait-for-an-unreachable-host')) {
        log.warn('the sandbox host is unreachable; the next attempt starts without waiting for its teardown', { sandbox: p.handle.id, hostQueue: p.hostQueue });
      } else {
        await teardown;
      }
    }
  }

  const maxAttempts = 1 + group.failurePolicy.infra.retries;
  let result: RolloutResult;
  for (let attempt = 0; ; attempt++) {
    attemptResume = {};
    reachedAgent = false;
    try {
      if (cancelReason !== null) throw new CancelledByOperator();
      const scope = new CancellationScope();
      attemptScope = scope;
      const outcome = await scope.run(() => runAttempt(attempt));
      summarize({ attempt, outcomeClass: outcome.outcomeClass, outcomeType: outcome.outcomeType, message: outcome.message, reward: outcome.reward, turns: outcome.turns, ...(outcome.evidence ? { evidence: outcome.evidence } : {}) });
      const valid = outcome.outcomeClass === 'ok' || group.failurePolicy.model === 'score';
      result = finish(outcome.reward, valid, outcome.outcomeClass, outcome.outcomeType, attempt + 1);
      break;
    } catch (err) {
      if (cancelReason !== null && (isCancellation(err) || err instanceof CancelledByOperator)) {
        summarize({ attempt, outcomeClass: 'cancelled', outcomeType: 'operator', message: cancelReason, reward: null, turns: progress.turn });
        result = finish(null, false, 'cancelled', 'operator', attempt + 1);
        break;
      }
      if (isCancellation(err)) throw err;
      if (err instanceof StaleRestart) {
        staleRestarts++;
        // Restarted to sample at the newer version: nothing of this attempt is taken over.
        resumeFrom = null;
        summarize({ attempt, outcomeClass: 'cancelled', outcomeType: 'stale_restart', message: err.message, reward: null, turns: progress.turn });
        log.info('attempt restarted at a newer policy version', { rollout: index, attempt, message: err.message });
        continue;
      }
      const c = classifyFailure(err);
      // Failure attribution (activities/attribution/) laid the end on the agent: it made verification
      // impossible. Scored as a failed attempt, never retried, never masked unless the policy masks model.
      if (c.failureClass === 'model' && patched('attributed-model-failures')) {
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
        if (group.failurePolicy.resume === 'replay' && reachedAgent) resumeFrom = attempt;
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
      tokenIntegrity: attemptState.tokenIntegrity,
      policyVersions: attemptState.attemptVersions,
      ...(staleRestarts > 0 ? { staleRestarts } : {}),
      ...(parentTurns ? { branch: { parentRolloutId: parentTurns.rolloutWorkflowId, atTurn: parentTurns.atTurn, sharedTurns } } : {}),
    };
  }
}

/** What a failed attempt workflow had done (details[0] of its failure), if it says. */
function attemptFailureDetails(failure: ApplicationFailure): AttemptFailureDetails | undefined {
  const first: unknown = failure.details?.[0];
  return isAttemptFailureDetails(first) ? first : undefined;
}
