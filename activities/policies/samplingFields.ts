/**
 * The sampling fields of one policy request, the same for chat completions
 * (openaiPolicy.ts) and token-level completions (tokens/tokenLevelPolicy.ts):
 * temperature, top_p, the turn's max_tokens and one seed per rollout, attempt
 * and turn (reproducible, yet the rollouts of a group differ).
 */
import type { z } from 'zod';
import type { SamplingSchema } from '../../shared/pipeline.js';
import type { PolicyRequest } from './policyClient.js';

type Sampling = z.output<typeof SamplingSchema>;

/** One seed per rollout, attempt and turn. */
export function turnSeed(seed: number, request: Pick<PolicyRequest, 'rolloutIndex' | 'attempt' | 'turn'>): number {
  return seed + request.rolloutIndex * 100_003 + request.attempt * 1_009 + request.turn;
}

export interface SamplingFields {
  temperature?: number;
  top_p?: number;
  max_tokens: number;
  seed?: number;
}

export function samplingFields(sampling: Sampling, maxTokens: number, request: Pick<PolicyRequest, 'rolloutIndex' | 'attempt' | 'turn'>): SamplingFields {
  return {
    ...(sampling.temperature !== undefined ? { temperature: sampling.temperature } : {}),
    ...(sampling.top_p !== undefined ? { top_p: sampling.top_p } : {}),
    max_tokens: maxTokens,
    ...(sampling.seed !== undefined ? { seed: turnSeed(sampling.seed, request) } : {}),
  };
}
