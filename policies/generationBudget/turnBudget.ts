/**
 * How long one policy call may take when the user set no requestTimeoutMs:
 * derived from the turn's max_tokens, so a long but legitimate generation
 * fits and a runaway one ends. The floor rate is a slow but healthy server
 * (Qwen2.5-Coder-0.5B on one busy CPU core made 2-5 tok/s at worst, 22-27
 * usually); the base covers prompt processing and the round trip. The cap
 * keeps the call inside the policyStep activity's 5-minute start-to-close
 * timeout, so the pipeline, not Temporal, decides what a timeout means.
 */
import { DEFAULT_MAX_TOKENS_PER_TURN, MAX_REQUEST_TIMEOUT_MS } from '../../shared/pipeline.js';

export const BASE_MS = 30_000;
export const MS_PER_TOKEN_AT_FLOOR = 250;
export const MAX_DERIVED_TIMEOUT_MS = MAX_REQUEST_TIMEOUT_MS;

export interface TurnBudget {
  maxTokens: number;
  timeoutMs: number;
  /** Where timeoutMs came from, for error messages. */
  timeoutSource: 'requestTimeoutMs' | 'derived from max_tokens';
}

export function turnBudget(config: { sampling: { max_tokens?: number | undefined }; requestTimeoutMs?: number | undefined }): TurnBudget {
  // Rollouts started before max_tokens had a default carry none; they get the default too.
  const maxTokens = config.sampling.max_tokens ?? DEFAULT_MAX_TOKENS_PER_TURN;
  if (config.requestTimeoutMs !== undefined) return { maxTokens, timeoutMs: config.requestTimeoutMs, timeoutSource: 'requestTimeoutMs' };
  return { maxTokens, timeoutMs: Math.min(MAX_DERIVED_TIMEOUT_MS, BASE_MS + maxTokens * MS_PER_TOKEN_AT_FLOOR), timeoutSource: 'derived from max_tokens' };
}
