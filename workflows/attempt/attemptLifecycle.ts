/**
 * One attempt of a rollout, top to bottom:
 *
 *   provision   a fresh sandbox (main queue; the sandbox's host is returned)
 *   restore     failurePolicy.resume 'replay' or a branch: earlier turns replayed into it
 *   agent       the agent loop and the verdict, here (agentLoop.ts) or in an attempt workflow on
 *               the sandbox's host (group.attemptOn 'host', attemptOnHost.ts)
 *   teardown    always, never cancelled, here and only here (unless the verdict's call or the
 *               attempt workflow on the host did it already)
 *
 * It returns what happened (attemptReport.ts): the rollout decides from the report whether to
 * finish, retry or restart; nothing is thrown but a cancellation of the workflow itself.
 */
import { deprecatePatch, log, workflowInfo } from '@temporalio/workflow';
import type { ProvisionOutput, RestoredPrefix } from '../../activities/contract.js';
import type { AttemptSummary, BranchOf, ExperimentRecord, RolloutInput } from '../../shared/pipeline.js';
import { hostUnreachable } from '../classifyFailure.js';
import type { ProgressBoard } from '../definitions.js';
import { runAgentThenVerify, staleRestartReason } from './agentLoop.js';
import { runAttemptOnHost } from './attemptOnHost.js';
import { failedBeforeTurns, type AttemptReport } from './attemptReport.js';
import type { SummarizedCall } from './callActivity.js';
import { hostActivities, type HostCalls } from './hostCalls.js';
import { tearDownSandbox } from './sandboxTeardown.js';

/** What stays the same over a rollout's attempts. */
export interface RolloutSide {
  input: RolloutInput;
  trajectoryRef: string;
  /** When the rollout started (Date.now() in the workflow): the first provision's queue time is measured from it. */
  startedAt: number;
  board: ProgressBoard;
  /** The rollout's policy version now (a signal may raise it between turns). */
  policyVersion: () => number;
  provisionSandbox: SummarizedCall<'provisionSandbox'>;
  policyStep: SummarizedCall<'policyStep'>;
  /** group.branching: before each turn's policy call (the rollout starts its branches there). */
  beforeTurn?: (turn: number, attempt: number) => Promise<void>;
  /** The attempt workflow now running on the sandbox's host, or null once it ended (the rollout passes new policy versions on to it). */
  onHostAttempt: (attemptWorkflowId: string | null) => void;
}

/** Where this attempt's turns start: an earlier attempt's (resume 'replay'), the parent's (a branch), or turn 0. */
export type RestoreFrom = { kind: 'attempt'; attempt: number } | { kind: 'branch'; branchOf: BranchOf } | null;

export interface AttemptPlan {
  attempt: number;
  restoreFrom: RestoreFrom;
  /** Whether a staleness restart is still allowed (the rollout counts them). */
  mayRestartStale: boolean;
}

/** What the restore did, for the attempt's summary and the next attempt's plan. */
export interface RestoreReport {
  asBranch: boolean;
  resumed?: NonNullable<AttemptSummary['resumed']>;
  /** Turns taken over (also the turns a branch shares with its parent). */
  turns?: number;
  divergence?: NonNullable<AttemptSummary['divergence']>;
}

export interface LifecycleReport extends AttemptReport {
  provisionMs: number;
  /** The first attempt only: from the rollout's start until a worker had its sandbox, less the provisioning. */
  queueMs?: number;
  /** The last provision's experiment record (absent when none succeeded). */
  experiment?: ExperimentRecord;
  restore?: RestoreReport;
  /** The attempt got past provisioning and restoring: it may have recorded turns a later attempt can take over. */
  reachedAgent: boolean;
}

export async function runAttempt(side: RolloutSide, plan: AttemptPlan): Promise<LifecycleReport> {
  const { group, index } = side.input;
  const { attempt } = plan;
  const { progress } = side.board;
  const info = workflowInfo();
  let provisionMs = 0;
  let queueMs: number | undefined;
  let experiment: ExperimentRecord | undefined;
  let restore: RestoreReport | undefined;
  let reachedAgent = false;
  /** A sandbox torn down before the attempt's last one (its replay diverged). */
  let earlierTeardownMs = 0;
  const lifecycle = (report: AttemptReport): LifecycleReport => ({
    ...report,
    timings: { ...report.timings, teardownMs: report.timings.teardownMs + earlierTeardownMs },
    provisionMs,
    ...(queueMs !== undefined ? { queueMs } : {}),
    ...(experiment ? { experiment } : {}),
    ...(restore ? { restore } : {}),
    reachedAgent,
  });

  progress.stage = 'provisioning';
  progress.attempt = attempt;
  progress.turn = 0;
  delete progress.attemptWorkflowId;
  side.board.show();
  // ---- provision ----
  const provision = async (fresh: boolean): Promise<ProvisionOutput> => {
    const out = await side.provisionSandbox(`provision ${fresh ? 'fresh ' : ''}local sandbox (attempt ${attempt + 1})`, {
      group,
      workflowId: info.workflowId,
      runId: info.runId,
      index,
      attempt,
      trajectoryRef: side.trajectoryRef,
    });
    provisionMs += out.provisionMs;
    if (attempt === 0 && !fresh) queueMs = Math.max(0, Date.now() - side.startedAt - out.provisionMs);
    // The build that runs this workflow (Worker Versioning pins it to the one it started on); replay-safe.
    const version = workflowInfo().currentDeploymentVersion;
    // An unversioned worker reports no deployment (its SDK-made build id has an empty deployment name): null.
    experiment = { ...out.experiment, workerBuild: version?.deploymentName ? { deploymentName: version.deploymentName, buildId: version.buildId } : null };
    return out;
  };
  let p: ProvisionOutput;
  try {
    p = await provision(attempt !== 0);
  } catch (err) {
    return lifecycle({ ...failedBeforeTurns(attempt, err), tornDown: true });
  }
  let host = hostActivities(p, group.limits.commandTimeoutSec);

  let report: AttemptReport;
  try {
    // ---- restore: earlier turns replayed into this sandbox ----
    const restored = plan.restoreFrom ? await restoreInto(side, plan, p, host) : undefined;
    if (restored) restore = restored;
    if (restored?.divergence) {
      // Not the same environment: nothing is taken over, and a sandbox holding part of a replay is no start for turn 0.
      log.warn('the replay diverged: the attempt starts at turn 0 on a fresh sandbox', { rollout: index, attempt, divergence: restored.divergence });
      progress.stage = 'tearing-down';
      earlierTeardownMs += await tearDownSandbox(host, p, side.trajectoryRef, attempt);
      p = await provision(true);
      host = hostActivities(p, group.limits.commandTimeoutSec);
    }
    const resumed = restored?.prefix;
    reachedAgent = true;
    // ---- agent: the loop and the verdict ----
    const mayRestart = plan.mayRestartStale;
    const beforeTurn = side.beforeTurn;
    const staleness = group.staleness ?? { onStale: 'keep' as const };
    if (group.attemptOn === 'host' && (deprecatePatch('attempt-as-child-on-host-queue'), true)) {
      progress.stage = 'agent';
      side.board.show();
      report = await runAttemptOnHost(
        {
          group,
          index,
          attempt,
          trajectoryRef: side.trajectoryRef,
          sandbox: p,
          policyVersion: side.policyVersion(),
          mayRestartStale: mayRestart,
          rolloutWorkflowId: info.workflowId,
          ...(resumed ? { resumed } : {}),
        },
        (childId) => {
          side.onHostAttempt(childId);
          if (childId === null) return;
          progress.attemptWorkflowId = childId;
          side.board.show();
        },
      );
      progress.turn = report.turns;
      if (report.end.kind === 'verified') progress.reward = report.end.outcome.reward;
    } else {
      report = await runAgentThenVerify({
        group,
        index,
        attempt,
        trajectoryRef: side.trajectoryRef,
        sandbox: p,
        policyStep: side.policyStep,
        host,
        versions: { current: side.policyVersion, staleRestartReason: (oldest) => staleRestartReason(staleness, side.policyVersion(), oldest, mayRestart) },
        board: side.board,
        ...(resumed ? { resumed } : {}),
        ...(beforeTurn ? { beforeTurn: (turn: number) => beforeTurn(turn, attempt) } : {}),
      });
    }
  } catch (err) {
    // Restoring (or provisioning again after a divergence) failed.
    report = failedBeforeTurns(attempt, err);
  }

  // ---- teardown: always, even when the rollout is cancelled (unless it followed the verdict) ----
  if (!report.tornDown) {
    progress.stage = 'tearing-down';
    const sandbox = p;
    const teardown = tearDownSandbox(host, sandbox, side.trajectoryRef, attempt).then((ms) => {
      report.timings.teardownMs += ms;
    });
    // A host nobody polls would leave the teardown waiting out the same schedule-to-start minute before the next
    // attempt could start. It is still scheduled (a host back in time runs it; else its reaper does the work when
    // it returns), but the next attempt on another host does not wait for it.
    if (report.end.kind === 'failed' && hostUnreachable(report.end.error) && (deprecatePatch('next-attempt-does-not-wait-for-an-unreachable-host'), true)) {
      log.warn('the sandbox host is unreachable; the next attempt starts without waiting for its teardown', { sandbox: sandbox.handle.id, hostQueue: sandbox.hostQueue });
    } else {
      await teardown;
    }
  }
  return lifecycle(report);
}

/** Replays the turns the plan names into the sandbox; what came of it (restored, diverged, or nothing to take over). */
async function restoreInto(side: RolloutSide, plan: AttemptPlan, p: ProvisionOutput, host: HostCalls): Promise<(RestoreReport & { prefix?: RestoredPrefix }) | undefined> {
  const { group } = side.input;
  const from = plan.restoreFrom;
  if (!from) return undefined;
  const branchOf = from.kind === 'branch' ? from.branchOf : undefined;
  side.board.progress.stage = 'restoring';
  side.board.show();
  const what = branchOf ? `turns 0-${branchOf.atTurn - 1} of ${branchOf.rolloutWorkflowId}` : `the turns of attempt ${(from.kind === 'attempt' ? from.attempt : 0) + 1}`;
  const restored = await host.restoreTurns(`restore ${what} by replay into sandbox ${p.handle.id}`, {
    handle: p.handle,
    trajectoryRef: side.trajectoryRef,
    fromAttempt: from.kind === 'attempt' ? from.attempt : from.branchOf.attempt,
    toAttempt: plan.attempt,
    workdir: p.workdir,
    commandTimeoutSec: group.limits.commandTimeoutSec,
    maxOutputBytes: group.limits.maxOutputBytes,
    scripted: group.policy.kind === 'scripted',
    ...(branchOf ? { branchOf: { rolloutWorkflowId: branchOf.rolloutWorkflowId, trajectoryRef: branchOf.trajectoryRef, turns: branchOf.atTurn } } : {}),
  });
  const asBranch = branchOf !== undefined;
  if (restored.status === 'restored') {
    const x = restored.prefix;
    const resumed = {
      ...(x.fromRollout !== undefined ? { fromRollout: x.fromRollout } : {}),
      fromAttempt: x.fromAttempt,
      turns: x.turns,
      nextTurnAnswered: x.nextTurnAnswered,
      method: x.method,
      replayedCalls: x.replayedCalls,
      replayMs: x.replayMs,
      stateChecked: x.stateChecked,
      drift: x.drift,
    };
    return { asBranch, resumed, turns: x.turns, prefix: x };
  }
  if (restored.status === 'diverged') return { asBranch, divergence: restored.divergence };
  return { asBranch };
}
