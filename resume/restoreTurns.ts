/**
 * Resume after an infra failure (failurePolicy.resume 'replay'): the new attempt's fresh sandbox is
 * brought to where the earlier attempt's last finished turn left its sandbox, by replaying that
 * attempt's tool calls (replayTurns.ts), and the finished turns are taken over into the new attempt
 * as they were recorded: the same answers, token ids, logprobs and policy versions, the same
 * observations. The agent loop then goes on at the next turn. The answer of the turn the earlier
 * attempt was in when it failed is taken over too: the policy step finds it recorded and does not
 * ask the model again.
 *
 * A replay that diverges (another exit code, other files) takes nothing over: the workflow starts the
 * attempt at turn 0 on another fresh sandbox, with the divergence in the attempt's history.
 */
import { ClassifiedError } from '../shared/failures.js';
import type { ReplayDivergence, ResumedTurns } from '../shared/pipeline.js';
import type { SandboxHandle, SandboxProvider } from '../shared/sandbox.js';
import { attemptPrefix, type TrajectoryStore } from '../stores/trajectoryStore.js';
import { policyName, toolName, type PolicyTurnRecord, type ToolTurnRecord } from '../agent/conversation.js';
import { parseToolCall } from '../agent/toolArguments.js';
import { turnIntegrity, type TurnTokenStatus } from '../policies/tokens/turnIntegrity.js';
import { turnTokensOf } from '../policies/tokens/turnTokensOf.js';
import { readRecordedTurns, type RecordedAttempt, type RecordedTurn } from './recordedTurns.js';
import { replayTurns } from './replayTurns.js';

export interface RestoreTurnsInput {
  handle: SandboxHandle;
  trajectoryRef: string;
  /** The attempt whose turns are taken over, and the one taking them. */
  fromAttempt: number;
  toAttempt: number;
  workdir: string;
  commandTimeoutSec: number;
  maxOutputBytes: number;
  /** The group's policy is scripted (its turns have no token ids, by design). */
  scripted: boolean;
  /**
   * A branch (group.branchOf): the turns come from another rollout's trajectory, exactly `turns` of them,
   * and the branch generates the next turn itself (no answer taken over).
   */
  branchOf?: { rolloutWorkflowId: string; trajectoryRef: string; turns: number };
}

/** What the agent loop needs to go on at turn `turns`. */
export interface RestoredPrefix extends ResumedTurns {
  /** The policy version of each turn taken over. */
  versions: number[];
  /** Each turn's token status, as the policy step reported it. */
  tokens: TurnTokenStatus[];
  /** Turns in a row, at the end, with only malformed calls. */
  malformedStreak: number;
  /** The last turn taken over submitted: the attempt goes straight to its verdict. */
  submitted: boolean;
  /** The agent time the turns took the first time (counted against this attempt's budget). */
  agentMs: number;
}

export type RestoreTurnsOutput = { status: 'restored'; prefix: RestoredPrefix } | { status: 'diverged'; divergence: ReplayDivergence } | { status: 'nothing'; reason: string };

/** Where the attempt's restore is described (restored or refused), beside its turns. */
export const restoreName = (attempt: number): string => `${attemptPrefix(attempt)}restore.json`;

export async function restoreTurns(provider: SandboxProvider, store: TrajectoryStore, input: RestoreTurnsInput, signal?: AbortSignal): Promise<RestoreTurnsOutput> {
  const { trajectoryRef: ref, fromAttempt, toAttempt, branchOf } = input;
  const recorded = branchOf ? await branchPrefix(store, branchOf, fromAttempt) : await readRecordedTurns(store, ref, fromAttempt);
  if (recorded.finished.length === 0 && !recorded.interrupted) return { status: 'nothing', reason: `attempt ${fromAttempt} recorded no turn` };
  const from = branchOf ? { fromRollout: branchOf.rolloutWorkflowId, fromAttempt } : { fromAttempt };
  const started = performance.now();
  const replay = await replayTurns(provider, input.handle, recorded.finished, input, `restore/${attemptPrefix(toAttempt)}from-${fromAttempt}`, signal);
  const replayMs = performance.now() - started;
  if (replay.status === 'diverged') {
    const divergence: ReplayDivergence = { ...from, turn: replay.turn, callIndex: replay.callIndex, what: replay.what, replayedCalls: replay.calls.length, replayMs };
    await store.put(ref, restoreName(toAttempt), { status: 'diverged', ...divergence, calls: replay.calls });
    return { status: 'diverged', divergence };
  }
  const byCall = new Map(replay.calls.map((c) => [`${c.turn}/${c.callIndex}`, c]));
  for (const [turn, t] of recorded.finished.entries()) {
    await store.put(ref, policyName(toAttempt, turn), { ...t.policy, restored: from } satisfies PolicyTurnRecord);
    for (const [callIndex, tool] of t.tools) {
      const again = byCall.get(`${turn}/${callIndex}`);
      const restored = { ...from, replayExitCode: again?.exitCode ?? null, replayMs: again?.durationMs ?? 0, drift: again?.drift ?? false };
      await store.put(ref, toolName(toAttempt, turn, callIndex), { ...tool, restored } satisfies ToolTurnRecord);
    }
  }
  const next = recorded.interrupted;
  if (next) await store.put(ref, policyName(toAttempt, recorded.finished.length), { ...next, restored: from } satisfies PolicyTurnRecord);
  const prefix: RestoredPrefix = {
    ...from,
    turns: recorded.finished.length,
    nextTurnAnswered: next !== null,
    method: 'replay',
    replayedCalls: replay.calls.length,
    replayMs,
    stateChecked: replay.stateChecked,
    drift: replay.calls.filter((c) => c.drift).length,
    versions: recorded.finished.map((t) => t.policy.policyVersion ?? 0),
    tokens: tokenStatuses(recorded.finished, input.scripted),
    malformedStreak: malformedStreak(recorded.finished),
    submitted: recorded.finished.at(-1)?.submitted ?? false,
    agentMs: agentTime(recorded.finished),
  };
  await store.put(ref, restoreName(toAttempt), { status: 'restored', ...prefix, calls: replay.calls });
  return { status: 'restored', prefix };
}

/**
 * A branch's prefix: exactly `turns` finished turns of the parent's attempt, and no answer after them
 * (each branch samples that turn itself). Too few is an error that names the rollout and the turn.
 */
async function branchPrefix(store: TrajectoryStore, branchOf: NonNullable<RestoreTurnsInput['branchOf']>, attempt: number): Promise<RecordedAttempt> {
  const parent = await readRecordedTurns(store, branchOf.trajectoryRef, attempt);
  if (parent.finished.length < branchOf.turns) {
    throw new ClassifiedError(
      'task',
      'invalid_spec',
      `branch of ${branchOf.rolloutWorkflowId} at turn ${branchOf.turns}: its attempt ${attempt + 1} has ${parent.finished.length} finished turn(s) in the trajectory store (${store.locate(branchOf.trajectoryRef)}). Fix: branch at a turn from 1 to ${parent.finished.length}, or point the workers at the store the parent ran with`,
    );
  }
  return { finished: parent.finished.slice(0, branchOf.turns), interrupted: null };
}

/** Each turn's token status, checked again as the policy step checks it (the records are the same). */
function tokenStatuses(turns: readonly RecordedTurn[], scripted: boolean): TurnTokenStatus[] {
  return turns.map(({ policy }, turn) => {
    const previous = turn > 0 ? turns[turn - 1]?.policy : undefined;
    const tokens = policy.turnTokens ?? (scripted ? { reason: 'a scripted policy generates no tokens' } : undefined);
    return turnIntegrity(tokens, previous ? turnTokensOf(previous) : undefined, turn === 0, policy.promptProblem).status;
  });
}

function malformedStreak(turns: readonly RecordedTurn[]): number {
  let streak = 0;
  for (const { policy } of turns) {
    const calls = policy.assistant.tool_calls ?? [];
    streak = calls.length > 0 && calls.every((c) => !parseToolCall(c).ok) ? streak + 1 : 0;
  }
  return streak;
}

/** From the first turn's start to the end of the last finished call, by the steps' clocks; else the sum of the calls' own times. */
function agentTime(turns: readonly RecordedTurn[]): number {
  const first = turns[0]?.policy.clock?.stepStartedAt;
  const ends = turns.flatMap((t) => [t.policy.clock?.callEndedAt, ...[...t.tools.values()].map((r) => r.clock?.callEndedAt)]);
  if (first !== undefined && ends.every((e) => e !== undefined)) return Math.max(0, Math.max(...ends) - first);
  return turns.reduce((ms, t) => ms + t.policy.latencyMs + [...t.tools.values()].reduce((n, r) => n + r.durationMs, 0), 0);
}
