/**
 * A stored policy turn's token ids, whichever shape wrote it: `turnTokens`
 * (every record since token capture; the only copy since 2026-12-01), else
 * the raw server fields in `tokens` of older records (vLLM return_token_ids:
 * prompt_token_ids, token_ids and logprobs), read the way a live answer is.
 * Undefined when the record says nothing about ids.
 */
import type { MissingTokens, TurnTokens } from '../../shared/tokens.js';
import type { PolicyResponse } from '../policyClient.js';
import { parseCompletionTokens, serverPromptIds } from './completionTokens.js';

export function turnTokensOf(record: Pick<PolicyResponse, 'tokens' | 'turnTokens'>): TurnTokens | MissingTokens | undefined {
  if (record.turnTokens) return record.turnTokens;
  const raw = record.tokens;
  if (!raw) return undefined;
  const promptIds = serverPromptIds(raw, {});
  const completion = parseCompletionTokens(raw, 0);
  if (!promptIds || 'missing' in completion) return undefined;
  return { source: 'server', promptIds, completionIds: completion.ids, completionLogprobs: completion.logprobs };
}
