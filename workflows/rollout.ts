/**
 * One rollout: one attempt at one task by the policy, retried on a fresh
 * sandbox when infrastructure fails. An attempt reads top to bottom:
 *
 *   provision sandbox           (main queue; the sandbox's host is returned)
 *   agent loop, in the workflow (each policy call and each tool call is its own activity)
 *   verify -> reward            (on the sandbox's host)
 *   teardown                    (on the sandbox's host, nonCancellable, in finally)
 *
 * Model failures (max turns, time budget, malformed calls, context overflow)
 * end the agent loop but are still verified and scored. Infra failures end
 * the attempt; a new one starts on a fresh sandbox until retries run out.
 */
import { CancellationScope, isCancellation, log, metricMeter, patched, proxyActivities, proxyLocalActivities, setCurrentDetails, setHandler, sleep, upsertSearchAttributes, workflowInfo, type ActivityOptions, type LocalActivityOptions } from '@temporalio/workflow';
import type { PipelineActivities, ProvisionOutput, VerifyOutput } from '../activities/createActivities.js';
import type { AttemptSummary, ExperimentRecord, OutcomeClass, RolloutInput, RolloutResult, StageTimings } from '../shared/pipeline.js';
import { NEVER_RETRIED } from '../shared/failures.js';
import { METRIC } from '../shared/metricNames.js';
import { trajectoryRefOf } from '../shared/names.js';
import { ROLLOUT_ATTEMPTS, ROLLOUT_OUTCOME, ROLLOUT_OUTCOME_CLASS, ROLLOUT_REWARD } from '../shared/searchAttributes.js';
import { classifyFailure, hostUnreachable, type Classified } from './classifyFailure.js';
import type { TokenIntegrity } from '../shared/tokens.js';
import { toolCallsSummary } from './toolCallsSummary.js';
import { HEARTBEAT_TIMEOUT } from './heartbeatTimeout.js';
import { cancelRolloutUpdate, policyVersionSignal, rolloutProgressQuery, type RolloutProgress } from './definitions.js';

/** Failures that retrying the same activity cannot fix: every model and task type, and these infra ones. */
const NON_RETRYABLE = [
  ...NEVER_RETRIED,
  'infra/sandbox_lost',
  'infra/capability_missing',
  'infra/provision_failed',
  'infra/provision_timeout',
  'infra/verifier_crashed',
  'infra/verifier_timeout',
];

const MALFORMED_TURNS_ALLOWED = 3;
/** Tool and verify activities heartbeat every 2 s; this long without one means their worker is gone. */

/** Thrown instead of starting an attempt once an operator cancelled the rollout. */
class CancelledByOperator extends Error {}

/** Ends an attempt whose turns fell too far behind the policy version (staleness.onStale restart). */
class StaleRestart extends Error {}

/** Restarts for staleness per rollout; past this the rollout goes on and is tagged stale. */
const MAX_STALE_RESTARTS = 5;

interface AttemptOutcome {
  reward: number;
  outcomeClass: Extract<OutcomeClass, 'ok' | 'model'>;
  outcomeType: string;
  message: string;
  turns: number;
}

/**
 * One activity of the pipeline with fixed options, called with a one-line
 * summary that the Temporal UI shows for that call (`turn 7: bash: pytest -x`).
 */
type Activities = PipelineActivities;
type ActivityName = Exclude<keyof Activities, symbol>;

function activity<K extends ActivityName>(name: K, options: ActivityOptions): (summary: string, ...args: Parameters<Activities[K]>) => Promise<Awaited<ReturnType<Activities[K]>>> {
  const fn = proxyActivities<Activities>(options)[name] as unknown as {
    executeWithOptions(options: ActivityOptions, args: Parameters<Activities[K]>): Promise<Awaited<ReturnType<Activities[K]>>>;
  };
  return (summary, ...args) => fn.executeWithOptions({ ...options, summary }, args);
}

/** The same as `activity`, run as a local activity of this workflow's worker (a marker in the history, with its summary). */
function localActivity<K extends ActivityName>(name: K, options: LocalActivityOptions): (summary: string, ...args: Parameters<Activities[K]>) => Promise<Awaited<ReturnType<Activities[K]>>> {
  const fn = proxyLocalActivities<Activities>(options)[name] as unknown as {
    executeWithOptions(options: LocalActivityOptions, args: Parameters<Activities[K]>): Promise<Awaited<ReturnType<Activities[K]>>>;
  };
  return (summary, ...args) => fn.executeWithOptions({ ...options, summary }, args);
}

function hostActivities(p: ProvisionOutput, commandTimeoutSec: number) {
  const onHost = { taskQueue: p.hostQueue, scheduleToStartTimeout: '1 minute' } as const;
  return {
    // Both heartbeat every 2 s: a worker that dies mid-command is noticed after HEARTBEAT_TIMEOUT, and the
    // call is retried on this host's queue (a restarted worker re-attaches to the surviving sandbox).
    tool: activity('runTool', { ...onHost, startToCloseTimeout: `${Math.ceil(commandTimeoutSec) + 60} seconds`, heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 3, nonRetryableErrorTypes: NON_RETRYABLE } }),
    // A turn's tool calls in one activity: each call's command may take up to its timeout.
    tools: (calls: number) => activity('runTools', { ...onHost, startToCloseTimeout: `${(Math.ceil(commandTimeoutSec) + 5) * calls + 60} seconds`, heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 3, nonRetryableErrorTypes: NON_RETRYABLE } }),
    verify: activity('verifyAttempt', { ...onHost, startToCloseTimeout: '30 minutes', heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 2, nonRetryableErrorTypes: NON_RETRYABLE } }),
    // The verdict and the teardown after it in one activity (one round trip fewer); 2 minutes more for the teardown.
    verifyThenTeardown: activity('verifyThenTeardown', { ...onHost, startToCloseTimeout: '32 minutes', heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 2, nonRetryableErrorTypes: NON_RETRYABLE } }),
    // Heartbeats too: a teardown started by a worker that then died is retried after HEARTBEAT_TIMEOUT
    // (a cancelled run's next start waits for it), not after the whole 2 minutes.
    teardown: activity('teardownSandbox', { ...onHost, startToCloseTimeout: '2 minutes', heartbeatTimeout: HEARTBEAT_TIMEOUT, retry: { maximumAttempts: 5, initialInterval: '1 second' } }),
  };
}

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
    if (version > policyVersion) policyVersion = version;
  });
  const staleness = group.staleness ?? { onStale: 'keep' as const };
  let staleRestarts = 0;
  let attemptVersions: number[] = [];
  let tokenIntegrity: TokenIntegrity = { status: 'missing', attempt: 0, turns: 0, reason: 'the attempt has no policy turns' };

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
  // An unavailable endpoint (5xx, 429, refused, timeout) is waited out here, never shown to the model.
  const policyRetry = { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '15 seconds', maximumAttempts: 20, nonRetryableErrorTypes: NON_RETRYABLE };
  // group.policyCalls 'local': the call runs in this workflow's worker, a marker instead of an activity
  // task and the workflow task that follows it. A worker that dies mid-call is noticed when the workflow
  // task times out; the next worker asks again, or returns the answer if it was recorded (policyStep).
  const policyStep =
    group.policyCalls === 'local' && patched('policy-calls-as-local-activities')
      ? localActivity('policyStep', { startToCloseTimeout: '5 minutes', localRetryThreshold: '10 seconds', retry: policyRetry })
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
  const policyName = group.policy.kind === 'scripted' ? `scripted:${group.policy.script}` : group.policy.model;
  /** Live details the Temporal UI shows while the rollout runs. */
  const showProgress = (): void => {
    const action = progress.lastAction ? ` · ${progress.lastAction}` : '';
    setCurrentDetails(`**${progress.stage}** · attempt ${progress.attempt + 1} · turn ${progress.turn}${action}`);
  };

  // Replay-safe metrics (not emitted while a history is replayed), served by the worker's Prometheus endpoint.
  const stageDuration = metricMeter.createHistogram(METRIC.stageDuration, 'float', 'ms', 'Per-rollout time in each stage');
  const outcomes = metricMeter.createCounter(METRIC.outcomes, undefined, 'Finished rollouts by outcome class and type');
  const attemptFailures = metricMeter.createCounter(METRIC.attemptFailures, undefined, 'Attempts ended by an infra failure');

  const timings: StageTimings = { queueMs: 0, provisionMs: 0, agentMs: 0, verifyMs: 0, teardownMs: 0 };
  const startedAt = Date.now();
  let experiment: ExperimentRecord | null = null;
  let totalTurns = 0;

  async function runAttempt(attempt: number): Promise<AttemptOutcome> {
    progress.stage = 'provisioning';
    progress.attempt = attempt;
    progress.turn = 0;
    attemptVersions = [];
    tokenIntegrity = { status: 'missing', attempt, turns: 0, reason: 'the attempt has no policy turns' };
    showProgress();
    const p = await provisionSandbox(`provision ${attempt === 0 ? '' : 'fresh '}local sandbox (attempt ${attempt + 1})`, { group, workflowId: info.workflowId, runId: info.runId, index, attempt, trajectoryRef });
    timings.provisionMs += p.provisionMs;
    // Queue: from the rollout's start until a worker had its first sandbox, less the provisioning itself.
    if (attempt === 0) timings.queueMs = Math.max(0, Date.now() - startedAt - p.provisionMs);
    // The build that runs this workflow (Worker Versioning pins it to the one it started on); replay-safe.
    const version = workflowInfo().currentDeploymentVersion;
    // An unversioned worker reports no deployment (its SDK-made build id has an empty deployment name): null.
    experiment = { ...p.experiment, workerBuild: version?.deploymentName ? { deploymentName: version.deploymentName, buildId: version.buildId } : null };
    const host = hostActivities(p, group.limits.commandTimeoutSec);
    let hostGone = false;
    let tornDown = false;

    try {
      // ---- agent loop: the policy proposes tool calls, the sandbox runs them ----
      progress.stage = 'agent';
      showProgress();
      const agentStart = Date.now();
      const budgetMs = p.agentTimeoutSec * 1000;
      let modelFailure: Classified | null = null;
      let malformedStreak = 0;
      let turn = 0;
      for (;;) {
        if (turn >= group.limits.maxTurns) {
          modelFailure = { failureClass: 'model', type: 'max_turns', message: `no submit after ${group.limits.maxTurns} turns (limits.maxTurns)` };
          break;
        }
        if (Date.now() - agentStart >= budgetMs) {
          modelFailure = { failureClass: 'model', type: 'agent_timeout', message: `agent time budget of ${p.agentTimeoutSec} s used up` };
          break;
        }
        const oldest = attemptVersions.length > 0 ? Math.min(...attemptVersions) : policyVersion;
        if (staleness.onStale === 'restart' && staleness.maxStaleness !== undefined && policyVersion - oldest > staleness.maxStaleness && staleRestarts < MAX_STALE_RESTARTS) {
          throw new StaleRestart(`policy version ${policyVersion} is ${policyVersion - oldest} ahead of this attempt's oldest turn (version ${oldest}), past maxStaleness ${staleness.maxStaleness}: restarted at version ${policyVersion}`);
        }
        const version = policyVersion;
        let step;
        try {
          step = await policyStep(`turn ${turn}: policy ${policyName}`, { policy: group.policy, task: group.task, trajectoryRef, rolloutIndex: index, attempt, turn, policyVersion: version });
        } catch (err) {
          const c = classifyFailure(err);
          if (c.failureClass === 'model') {
            modelFailure = c;
            break;
          }
          throw err;
        }
        // The version the turn's answer was sampled under (a retry returns an answer recorded under an earlier one).
        attemptVersions.push(step.policyVersion ?? version);
        const tokens = step.tokens ?? { status: 'missing' as const, reason: 'the worker that ran this turn does not capture tokens' };
        const firstProblem = tokenIntegrity.turns > 0 && tokenIntegrity.status !== 'ok';
        tokenIntegrity = firstProblem
          ? { ...tokenIntegrity, turns: turn + 1 }
          : tokens.status === 'ok'
            ? { status: 'ok', attempt, turns: turn + 1 }
            : { status: tokens.status, attempt, turns: turn + 1, turn, ...(tokens.position !== undefined ? { position: tokens.position } : {}), reason: tokens.reason ?? '' };
        const runnable = step.calls.flatMap((call, callIndex) => (call.name === 'submit' && !call.malformed ? [] : [{ ...call, callIndex }]));
        // Rollouts started before this step existed replay with one activity per call (patched() is false for them).
        if (runnable.length > 1 && patched('tool-calls-of-a-turn-in-one-activity')) {
          const remainingMs = budgetMs - (Date.now() - agentStart);
          if (remainingMs > 0) {
            progress.lastAction = `turn ${turn}: ${runnable.map((c) => c.summary).join(' · ')}`;
            showProgress();
            // The Temporal UI shows every call of the turn: their summaries here, each call's result in the activity's result.
            await host.tools(runnable.length)(toolCallsSummary(turn, runnable.map((c) => c.summary)), {
              handle: p.handle,
              trajectoryRef,
              attempt,
              turn,
              callIndexes: runnable.map((c) => c.callIndex),
              workdir: p.workdir,
              commandTimeoutSec: group.limits.commandTimeoutSec,
              maxOutputBytes: group.limits.maxOutputBytes,
              remainingMs,
            });
          }
        } else for (const [callIndex, call] of step.calls.entries()) {
          if (call.name === 'submit' && !call.malformed) continue;
          const remainingMs = budgetMs - (Date.now() - agentStart);
          if (remainingMs <= 0) break;
          progress.lastAction = `turn ${turn}: ${call.summary}`;
          showProgress();
          await host.tool(progress.lastAction, {
            handle: p.handle,
            trajectoryRef,
            attempt,
            turn,
            callIndex,
            workdir: p.workdir,
            commandTimeoutSec: group.limits.commandTimeoutSec,
            maxOutputBytes: group.limits.maxOutputBytes,
            remainingMs,
          });
        }
        malformedStreak = step.calls.length > 0 && step.calls.every((c) => c.malformed) ? malformedStreak + 1 : 0;
        turn++;
        progress.turn = turn;
        if (step.submitted) break;
        if (malformedStreak >= MALFORMED_TURNS_ALLOWED) {
          modelFailure = { failureClass: 'model', type: 'malformed_tool_call', message: `${MALFORMED_TURNS_ALLOWED} turns in a row with only malformed tool calls` };
          break;
        }
      }
      timings.agentMs += Date.now() - agentStart;
      totalTurns += turn;

      // ---- verify: the final state is scored, whatever ended the loop ----
      progress.stage = 'verifying';
      showProgress();
      const verifyInput = { handle: p.handle, group, index, attempt, trajectoryRef };
      // Rollouts started before the two were one activity replay with verify and teardown apart.
      let verified: VerifyOutput;
      if (patched('verify-then-teardown-in-one-activity')) {
        const out = await host.verifyThenTeardown(`verify (${group.verifyMode}), then teardown sandbox ${p.handle.id}`, verifyInput);
        if (out.teardown.done) {
          tornDown = true;
          timings.teardownMs += out.teardown.teardownMs;
        } else log.warn('teardown after the verdict failed; the workflow tears down', { sandbox: p.handle.id, error: out.teardown.error });
        verified = out;
      } else verified = await host.verify(`verify (${group.verifyMode})`, verifyInput);
      timings.verifyMs += verified.verifyMs;
      progress.reward = verified.reward;
      return {
        reward: verified.reward,
        outcomeClass: modelFailure ? 'model' : 'ok',
        outcomeType: modelFailure?.type ?? 'submitted',
        message: modelFailure?.message ?? '',
        turns: turn,
      };
    } catch (err) {
      hostGone = hostUnreachable(err);
      throw err;
    } finally {
      // ---- teardown: always, even when the rollout is cancelled (unless it followed the verdict) ----
      if (!tornDown) await tearDown();
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
    try {
      if (cancelReason !== null) throw new CancelledByOperator();
      const scope = new CancellationScope();
      attemptScope = scope;
      const outcome = await scope.run(() => runAttempt(attempt));
      history.push({ attempt, outcomeClass: outcome.outcomeClass, outcomeType: outcome.outcomeType, message: outcome.message, reward: outcome.reward, turns: outcome.turns });
      const valid = outcome.outcomeClass === 'ok' || group.failurePolicy.model === 'score';
      result = finish(outcome.reward, valid, outcome.outcomeClass, outcome.outcomeType, attempt + 1);
      break;
    } catch (err) {
      if (cancelReason !== null && (isCancellation(err) || err instanceof CancelledByOperator)) {
        history.push({ attempt, outcomeClass: 'cancelled', outcomeType: 'operator', message: cancelReason, reward: null, turns: progress.turn });
        result = finish(null, false, 'cancelled', 'operator', attempt + 1);
        break;
      }
      if (isCancellation(err)) throw err;
      if (err instanceof StaleRestart) {
        staleRestarts++;
        history.push({ attempt, outcomeClass: 'cancelled', outcomeType: 'stale_restart', message: err.message, reward: null, turns: progress.turn });
        log.info('attempt restarted at a newer policy version', { rollout: index, attempt, message: err.message });
        continue;
      }
      const c = classifyFailure(err);
      // Failure attribution (activities/attribution/) laid the end on the agent: it made verification
      // impossible. Scored as a failed attempt, never retried, never masked unless the policy masks model.
      if (c.failureClass === 'model' && patched('attributed-model-failures')) {
        const reward = group.failurePolicy.failedAttemptReward ?? 0;
        history.push({ attempt, outcomeClass: 'model', outcomeType: c.type, message: c.message, reward, turns: progress.turn, ...(c.evidence ? { evidence: c.evidence } : {}) });
        log.warn('attempt failed: attributed to the agent', { rollout: index, attempt, type: c.type, message: c.message, evidence: c.evidence });
        progress.reward = reward;
        result = finish(reward, group.failurePolicy.model === 'score', 'model', c.type, attempt + 1, c.evidence);
        break;
      }
      history.push({ attempt, outcomeClass: c.failureClass, outcomeType: c.type, message: c.message, reward: null, turns: progress.turn, ...(c.evidence ? { evidence: c.evidence } : {}) });
      log.warn('attempt failed', { rollout: index, attempt, failureClass: c.failureClass, type: c.type, message: c.message });
      if (c.failureClass === 'infra') attemptFailures.add(1, { outcome_type: c.type });
      if (c.failureClass === 'infra' && attempt - staleRestarts + 1 < maxAttempts) {
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
  // Rollouts started before this step existed replay without it (patched() is false for them).
  if (patched('record-rollout-in-store')) {
    await CancellationScope.nonCancellable(() =>
      recordRollout(`record outcome ${result.outcomeClass}/${result.outcomeType}`, { batchId: group.batchId, taskId: group.task.id, taskVersion: group.task.version, result }).catch((err: unknown) => {
        // The result itself is in the workflow's history either way; the store copy is for queries.
        log.warn('could not record the rollout in the store', { rollout: index, error: String(err) });
      }),
    );
  }
  return result;

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
      tokenIntegrity,
      policyVersions: attemptVersions,
      ...(staleRestarts > 0 ? { staleRestarts } : {}),
    };
  }
}
