/**
 * What one attempt did, as both placements report it: the agent loop and verdict run by the rollout
 * itself, or by an attempt workflow on the sandbox's host (group.attemptOn 'host'). The rollout reads
 * its retry decision from `end` and its result's turn versions and token integrity from the rest.
 */
import type { TurnTokenStatus } from '../../activities/contract.js';
import type { OutcomeClass, StageTimings } from '../../shared/pipeline.js';
import type { TokenIntegrity } from '../../shared/tokens.js';

/** A verified attempt: whatever ended its loop, the final state was scored. */
export interface AttemptOutcome {
  reward: number;
  outcomeClass: Extract<OutcomeClass, 'ok' | 'model'>;
  outcomeType: string;
  message: string;
  turns: number;
  /** What showed why the loop ended, when something did (a harness's stderr tail). */
  evidence?: string[];
}

export type AttemptTimings = Pick<StageTimings, 'agentMs' | 'verifyMs' | 'teardownMs'>;

/** How an attempt ended: verified; failed (the error, classified by the rollout); or stopped to restart at a newer policy version. */
export type AttemptEnd = { kind: 'verified'; outcome: AttemptOutcome } | { kind: 'failed'; error: unknown } | { kind: 'stale'; reason: string };

export interface AttemptReport {
  end: AttemptEnd;
  /** Turns the attempt had finished when it ended. */
  turns: number;
  /** Turns of an agent loop that ran to its end (0 when the attempt failed during the loop or before it). */
  loopTurns: number;
  timings: AttemptTimings;
  /** The policy version of every turn, in order. */
  attemptVersions: number[];
  tokenIntegrity: TokenIntegrity;
  /** The sandbox is gone already (the teardown followed the verdict in one call, or the attempt's host tore it down). */
  tornDown: boolean;
}

export function noTokens(attempt: number): TokenIntegrity {
  return { status: 'missing', attempt, turns: 0, reason: 'the attempt has no policy turns' };
}

/** The report of an attempt that failed before its agent loop did anything. */
export function failedBeforeTurns(attempt: number, error: unknown): AttemptReport {
  return { end: { kind: 'failed', error }, turns: 0, loopTurns: 0, timings: { agentMs: 0, verifyMs: 0, teardownMs: 0 }, attemptVersions: [], tokenIntegrity: noTokens(attempt), tornDown: false };
}

/** The attempt's token integrity after one more turn whose tokens are `tokens`: the first problem stays the one reported. */
export function withTurnTokens(soFar: TokenIntegrity, tokens: TurnTokenStatus, attempt: number, turn: number): TokenIntegrity {
  if (soFar.turns > 0 && soFar.status !== 'ok') return { ...soFar, turns: turn + 1 };
  if (tokens.status === 'ok') return { status: 'ok', attempt, turns: turn + 1 };
  return { status: tokens.status, attempt, turns: turn + 1, turn, ...(tokens.position !== undefined ? { position: tokens.position } : {}), reason: tokens.reason ?? '' };
}
