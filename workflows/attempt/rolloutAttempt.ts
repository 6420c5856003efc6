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
 * It fails only with ApplicationFailure (attemptWorkflow.ts encodes the attempt's report into it, the
 * rollout decodes it): any other error would fail its workflow task and retry forever.
 */
import { isCancellation, setCurrentDetails, setHandler } from '@temporalio/workflow';
import { policyVersionSignal, rolloutProgressQuery, type RolloutProgress } from '../definitions.js';
import { runAgentThenVerify, staleRestartReason } from './agentLoop.js';
import { attemptFailure, type AttemptInput, type AttemptResult } from './attemptWorkflow.js';
import { localActivityRunToEnd } from './callActivity.js';
import { hostLocalActivities } from './hostCalls.js';
import { POLICY_RETRY } from './nonRetryable.js';
import { tearDownSandbox } from './sandboxTeardown.js';

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
