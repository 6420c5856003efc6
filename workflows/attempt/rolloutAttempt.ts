/**
 * One attempt of a rollout, run as a workflow on its sandbox's host (group.attemptOn 'host'): the
 * rollout starts it as a child on the host's task queue once the sandbox is provisioned. Every
 * policy call and tool call of the attempt, the verdict and the teardown are local activities of
 * the host's worker: markers in this workflow's history, each with the summary the Web UI shows,
 * and most of them in one workflow task, instead of an activity task and a workflow task each.
 *
 * A host worker that dies mid-turn loses at most that turn: its workflow task times out, the
 * host's next worker replays the history to the last recorded marker and calls again (a policy
 * step returns its recorded answer, a tool call its recorded result or the command still running).
 *
 * It fails only with ApplicationFailure (the rollout reads the class from its type, and what the
 * attempt did from its details): any other error would fail its workflow task and retry forever.
 */
import { ApplicationFailure, CancellationScope, isCancellation, log, setCurrentDetails, setHandler } from '@temporalio/workflow';
import { policyLabel } from '../../shared/policyLabel.js';
import { classifyFailure } from '../classifyFailure.js';
import { policyVersionSignal, rolloutProgressQuery, type RolloutProgress } from '../definitions.js';
import { freshAttemptState, runAgentThenVerify, StaleRestart, staleRestartReason, type AttemptOutcome } from './agentLoop.js';
import { STALE_RESTART_FAILURE, type AttemptFailureDetails, type AttemptInput, type AttemptResult, type AttemptTimings } from './attemptWorkflow.js';
import { localActivityRunToEnd } from './callActivity.js';
import { hostLocalActivities } from './hostCalls.js';
import { POLICY_RETRY } from './nonRetryable.js';

export async function rolloutAttempt(input: AttemptInput): Promise<AttemptResult> {
  const { group, index, attempt, trajectoryRef, sandbox: p } = input;
  const progress: RolloutProgress = { stage: 'agent', attempt, turn: 0, lastAction: '', reward: null };
  setHandler(rolloutProgressQuery, () => ({ ...progress }));
  let policyVersion = input.policyVersion;
  setHandler(policyVersionSignal, (version) => {
    if (version > policyVersion) policyVersion = version;
  });
  const staleness = group.staleness ?? { onStale: 'keep' as const };
  const policyName = policyLabel(group.policy);
  const showProgress = (): void => {
    const action = progress.lastAction ? ` · ${progress.lastAction}` : '';
    setCurrentDetails(`**${progress.stage}** · rollout ${input.rolloutWorkflowId} · attempt ${attempt + 1} · turn ${progress.turn}${action}`);
  };
  const host = hostLocalActivities(p, group.limits.commandTimeoutSec);
  const state = freshAttemptState(attempt);
  const timings = { queueMs: 0, provisionMs: 0, agentMs: 0, verifyMs: 0, teardownMs: 0 };
  let turns = 0;
  const attemptTimings = (): AttemptTimings => ({ agentMs: timings.agentMs, verifyMs: timings.verifyMs, teardownMs: timings.teardownMs });

  let outcome: AttemptOutcome;
  try {
    outcome = await runAgentThenVerify({
      group,
      index,
      attempt,
      trajectoryRef,
      sandbox: p,
      policyName,
      policyStep: localActivityRunToEnd('policyStep', { startToCloseTimeout: '5 minutes', localRetryThreshold: '10 seconds', retry: POLICY_RETRY }),
      host,
      policyVersion: () => policyVersion,
      staleRestartReason: (oldest) => staleRestartReason(staleness, policyVersion, oldest, input.mayRestartStale),
      progress,
      showProgress,
      timings,
      onTurnsDone: (n) => {
        turns = n;
      },
      state,
      ...(input.resumed ? { resumed: input.resumed } : {}),
    });
  } catch (err) {
    if (isCancellation(err)) throw err;
    const details = (evidence?: string[]): AttemptFailureDetails => ({ ...(evidence ? { evidence } : {}), turns: Math.max(turns, progress.turn), loopTurns: turns, timings: attemptTimings(), attemptVersions: state.attemptVersions, tokenIntegrity: state.tokenIntegrity });
    if (err instanceof StaleRestart) throw ApplicationFailure.create({ type: STALE_RESTART_FAILURE, message: err.message, nonRetryable: true, details: [details()] });
    const c = classifyFailure(err);
    throw ApplicationFailure.create({ type: `${c.failureClass}/${c.type}`, message: c.message, nonRetryable: true, details: [details(c.evidence)], ...(err instanceof Error ? { cause: err } : {}) });
  } finally {
    // ---- teardown: always, also when the rollout cancelled the attempt (unless it followed the verdict) ----
    if (!state.tornDown) {
      progress.stage = 'tearing-down';
      await CancellationScope.nonCancellable(async () => {
        try {
          timings.teardownMs += (await host.teardown(`teardown sandbox ${p.handle.id}`, { handle: p.handle, trajectoryRef, attempt })).teardownMs;
        } catch (err) {
          log.warn('teardown failed; the reaper will remove the sandbox', { sandbox: p.handle.id, error: String(err) });
        }
      });
    }
    progress.stage = 'done';
  }
  return { outcome, timings: attemptTimings(), attemptVersions: state.attemptVersions, tokenIntegrity: state.tokenIntegrity };
}
