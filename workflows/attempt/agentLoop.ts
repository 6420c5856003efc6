/**
 * The body of one attempt on a provisioned sandbox: the agent loop (the policy proposes tool calls,
 * the sandbox runs them) and then the verdict, whatever ended the loop. The rollout workflow runs it
 * itself, or an attempt workflow on the sandbox's host runs it (group.attemptOn 'host'); only the
 * calls differ (tasks on queues, or local activities of the host's worker). It returns what happened
 * (attemptReport.ts); the teardown is its caller's (attempt/sandboxTeardown.ts).
 *
 * Model failures (max turns, time budget, malformed calls, context overflow) end the loop but are
 * still verified and scored; an infra failure ends the attempt, reported as `failed`.
 */
import { log, patched } from '@temporalio/workflow';
import type { ProvisionOutput, RestoredPrefix, VerifyOutput } from '../../activities/contract.js';
import type { RolloutInput } from '../../shared/pipeline.js';
import { policyLabel } from '../../shared/policyLabel.js';
import { classifyFailure, type Classified } from '../classifyFailure.js';
import type { ProgressBoard } from '../definitions.js';
import { toolCallsSummary } from '../toolCallsSummary.js';
import { noTokens, withTurnTokens, type AttemptOutcome, type AttemptReport } from './attemptReport.js';
import type { SummarizedCall } from './callActivity.js';
import type { HostCalls } from './hostCalls.js';

const MALFORMED_TURNS_ALLOWED = 3;

/** Ends an attempt whose turns fell too far behind the policy version (staleness.onStale restart). */
class StaleRestart extends Error {}

/** The policy version the next turn runs under (a signal may raise it between turns), and whether the attempt must restart at it. */
export interface PolicyVersions {
  current(): number;
  /** Why the attempt must restart at the current version, given its oldest turn's version; null to go on. */
  staleRestartReason(oldestVersion: number): string | null;
}

export interface AgentLoopInput {
  group: RolloutInput['group'];
  index: number;
  attempt: number;
  trajectoryRef: string;
  sandbox: ProvisionOutput;
  policyStep: SummarizedCall<'policyStep'>;
  host: HostCalls;
  versions: PolicyVersions;
  board: ProgressBoard;
  /** Turns taken over from an earlier attempt (failurePolicy.resume 'replay'): the loop goes on after them. */
  resumed?: RestoredPrefix;
  /** Called before each turn's policy call (group.branching starts the rollout's branches there). */
  beforeTurn?: (turn: number) => Promise<void>;
}

/**
 * Why an attempt must restart at the current policy version (staleness.onStale 'restart'), given its
 * oldest turn's version; null to go on. `mayRestart` is false once the rollout used up its restarts.
 */
export function staleRestartReason(staleness: NonNullable<RolloutInput['group']['staleness']> | undefined, current: number, oldest: number, mayRestart: boolean): string | null {
  if (staleness?.onStale !== 'restart' || staleness.maxStaleness === undefined || !mayRestart || current - oldest <= staleness.maxStaleness) return null;
  return `policy version ${current} is ${current - oldest} ahead of this attempt's oldest turn (version ${oldest}), past maxStaleness ${staleness.maxStaleness}: restarted at version ${current}`;
}

/** The agent loop, then the verdict: what the attempt did, however it ended. */
export async function runAgentThenVerify(a: AgentLoopInput): Promise<AttemptReport> {
  const report: Omit<AttemptReport, 'end'> = { turns: 0, loopTurns: 0, timings: { agentMs: 0, verifyMs: 0, teardownMs: 0 }, attemptVersions: [], tokenIntegrity: noTokens(a.attempt), tornDown: false };
  try {
    const outcome = await loopThenVerify(a, report);
    return { ...report, turns: a.board.progress.turn, end: { kind: 'verified', outcome } };
  } catch (err) {
    const end = err instanceof StaleRestart ? { kind: 'stale' as const, reason: err.message } : { kind: 'failed' as const, error: err };
    return { ...report, turns: a.board.progress.turn, end };
  }
}

/** Writes what the attempt did into `state` as it goes; throws StaleRestart, or what ended the attempt. */
async function loopThenVerify(a: AgentLoopInput, state: Omit<AttemptReport, 'end'>): Promise<AttemptOutcome> {
  const { group, index, attempt, trajectoryRef, sandbox: p, host, resumed } = a;
  const { progress } = a.board;
  const timings = state.timings;
  const policyName = policyLabel(group.policy);
  // ---- agent loop: the policy proposes tool calls, the sandbox runs them ----
  progress.stage = 'agent';
  a.board.show();
  const budgetMs = p.agentTimeoutSec * 1000;
  // Turns taken over count as they ran the first time: their versions, tokens and agent time.
  const agentStart = Date.now() - (resumed?.agentMs ?? 0);
  let modelFailure: Classified | null = null;
  let malformedStreak = resumed?.malformedStreak ?? 0;
  let turn = resumed?.turns ?? 0;
  if (resumed) {
    state.attemptVersions = [...resumed.versions];
    resumed.tokens.forEach((tokens, t) => {
      state.tokenIntegrity = withTurnTokens(state.tokenIntegrity, tokens, attempt, t);
    });
    progress.turn = turn;
    progress.lastAction = `resumed at turn ${turn} from attempt ${resumed.fromAttempt + 1}`;
  }
  // The digest of the sandbox's files after each call, for a later attempt to check its replay against.
  const recordState = group.failurePolicy.resume === 'replay' ? { recordState: true } : {};
  // Taken-over turns that ended the loop the first time end it again: straight to the verdict.
  if (resumed && resumed.malformedStreak >= MALFORMED_TURNS_ALLOWED)
    modelFailure = { failureClass: 'model', type: 'malformed_tool_call', message: `${MALFORMED_TURNS_ALLOWED} turns in a row with only malformed tool calls` };
  if (group.policy.kind === 'harness') {
    // A published harness is the agent: one activity on the sandbox's host runs it whole (harnesses/).
    const remainingMs = Math.max(0, budgetMs - (Date.now() - agentStart));
    const version = a.versions.current();
    progress.lastAction = `${group.policy.harness} drives the sandbox`;
    a.board.show();
    const run = await host.harness(remainingMs)(`agent: ${group.policy.harness} on ${group.policy.inference.model}, sandbox ${p.handle.id}`, {
      handle: p.handle,
      group,
      index,
      attempt,
      trajectoryRef,
      workdir: p.workdir,
      remainingMs,
      policyVersion: version,
    });
    run.tokens.forEach((tokens, t) => {
      state.tokenIntegrity = withTurnTokens(state.tokenIntegrity, tokens, attempt, t);
    });
    if (run.segmentStarts.length > 0) state.tokenIntegrity = { ...state.tokenIntegrity, segmentStarts: run.segmentStarts };
    state.attemptVersions = run.tokens.map(() => version);
    turn = run.turns;
    progress.turn = turn;
    if (run.end) modelFailure = { failureClass: 'model', type: run.end.type, message: run.end.message, ...(run.end.evidence ? { evidence: run.end.evidence } : {}) };
  } else if (resumed?.submitted !== true && modelFailure === null) for (;;) {
    if (turn >= group.limits.maxTurns) {
      modelFailure = { failureClass: 'model', type: 'max_turns', message: `no submit after ${group.limits.maxTurns} turns (limits.maxTurns)` };
      break;
    }
    if (Date.now() - agentStart >= budgetMs) {
      modelFailure = { failureClass: 'model', type: 'agent_timeout', message: `agent time budget of ${p.agentTimeoutSec} s used up` };
      break;
    }
    await a.beforeTurn?.(turn);
    const oldest = state.attemptVersions.length > 0 ? Math.min(...state.attemptVersions) : a.versions.current();
    const stale = a.versions.staleRestartReason(oldest);
    if (stale !== null) throw new StaleRestart(stale);
    const version = a.versions.current();
    let step;
    try {
      step = await a.policyStep(`turn ${turn}: policy ${policyName}`, { policy: group.policy, task: group.task, trajectoryRef, rolloutIndex: index, attempt, turn, policyVersion: version });
    } catch (err) {
      const c = classifyFailure(err);
      if (c.failureClass === 'model') {
        modelFailure = c;
        break;
      }
      throw err;
    }
    // The version the turn's answer was sampled under (a retry returns an answer recorded under an earlier one).
    state.attemptVersions.push(step.policyVersion ?? version);
    const tokens = step.tokens ?? { status: 'missing' as const, reason: 'the worker that ran this turn does not capture tokens' };
    state.tokenIntegrity = withTurnTokens(state.tokenIntegrity, tokens, attempt, turn);
    const runnable = step.calls.flatMap((call, callIndex) => (call.name === 'submit' && !call.malformed ? [] : [{ ...call, callIndex }]));
    // Rollouts started before this step existed replay with one activity per call (patched() is false for them).
    if (runnable.length > 1 && patched('tool-calls-of-a-turn-in-one-activity')) {
      const remainingMs = budgetMs - (Date.now() - agentStart);
      if (remainingMs > 0) {
        progress.lastAction = `turn ${turn}: ${runnable.map((c) => c.summary).join(' · ')}`;
        a.board.show();
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
          ...recordState,
        });
      }
    } else
      for (const [callIndex, call] of step.calls.entries()) {
        if (call.name === 'submit' && !call.malformed) continue;
        const remainingMs = budgetMs - (Date.now() - agentStart);
        if (remainingMs <= 0) break;
        progress.lastAction = `turn ${turn}: ${call.summary}`;
        a.board.show();
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
          ...recordState,
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
  state.loopTurns = turn;

  // ---- verify: the final state is scored, whatever ended the loop ----
  progress.stage = 'verifying';
  a.board.show();
  const verifyInput = { handle: p.handle, group, index, attempt, trajectoryRef };
  // Rollouts started before the two were one activity replay with verify and teardown apart.
  let verified: VerifyOutput;
  if (patched('verify-then-teardown-in-one-activity')) {
    const out = await host.verifyThenTeardown(`verify (${group.verifyMode}), then teardown sandbox ${p.handle.id}`, verifyInput);
    if (out.teardown.done) {
      state.tornDown = true;
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
    ...(modelFailure?.evidence ? { evidence: modelFailure.evidence } : {}),
  };
}
