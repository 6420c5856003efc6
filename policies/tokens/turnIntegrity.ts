/**
 * The exact-prefix rule, checked when a turn is captured: this turn's prompt
 * ids must begin with the previous turn's prompt + completion ids. A break is
 * recorded with its position, never patched; the workflow gets the short form.
 */
import { checkPrefix, type MissingTokens, type PrefixCheck, type TurnTokens } from '../../shared/tokens.js';

/** What the workflow learns about one turn's tokens (small: it goes through history). */
export interface TurnTokenStatus {
  status: 'ok' | 'missing' | 'broken';
  position?: number;
  reason?: string;
}

export function hasIds(tokens: TurnTokens | MissingTokens | undefined | null): tokens is TurnTokens {
  return tokens !== undefined && tokens !== null && 'promptIds' in tokens;
}

export function turnIntegrity(
  tokens: TurnTokens | MissingTokens | undefined,
  previous: TurnTokens | MissingTokens | undefined | null,
  isFirstTurn: boolean,
  promptProblem?: string,
): { prefixCheck: PrefixCheck | null; status: TurnTokenStatus } {
  if (!hasIds(tokens)) return { prefixCheck: null, status: { status: 'missing', reason: tokens?.reason ?? 'the policy returned no token ids' } };
  if (isFirstTurn) return { prefixCheck: { ok: true }, status: { status: 'ok' } };
  if (!hasIds(previous)) return { prefixCheck: null, status: { status: 'missing', reason: 'the previous turn has no token ids to check this prompt against' } };
  const prefixCheck = checkPrefix(previous, tokens.promptIds);
  if (prefixCheck.ok) return { prefixCheck, status: { status: 'ok' } };
  const reason = promptProblem ? `${prefixCheck.reason}; ${promptProblem}` : prefixCheck.reason;
  return { prefixCheck: { ...prefixCheck, reason }, status: { status: 'broken', position: prefixCheck.position, reason } };
}
