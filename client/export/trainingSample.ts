/**
 * One rollout as a training sample: the token ids of its final attempt
 * (the last turn's prompt + completion, which under the exact-prefix rule
 * holds every earlier turn), a loss mask that is 1 only on tokens the policy
 * generated, their logprobs aligned to input_ids (null elsewhere), and the
 * reward and advantage. A turn whose completion is not where the rule puts it
 * (a prefix break, kept only on request) stays unmasked and is named.
 * Beside the logprobs: the temperature that sampled each generated token
 * (prime-rl divides its logits by it), and the first turn whose logprobs are
 * not those of the distribution that sampled its tokens, with why.
 */
import type { TokenIntegrity, TurnTokens } from '../../shared/tokens.js';

export interface TrainingSample {
  rollout_id: string;
  group_id: string;
  batch_id: string;
  task_id: string;
  task_version: string;
  rollout_index: number;
  input_ids: number[];
  loss_mask: (0 | 1)[];
  logprobs: (number | null)[];
  /** The sampling temperature of each generated token (null elsewhere, or where no record says). */
  temperatures: (number | null)[];
  /** "turn k: why" for the first turn whose logprobs are not its sampling distribution's; null when every turn's are. */
  logprob_mismatch: string | null;
  reward: number | null;
  advantage: number | null;
  /** Policy version of every turn, in order. */
  policy_versions: number[];
  /** [start, end) of each turn's completion in input_ids; null for a turn left unmasked. */
  completion_spans: ([number, number] | null)[];
  outcome: { class: string; type: string };
  token_integrity: TokenIntegrity & { unmasked_turns?: number[] };
  staleness: number | null;
  stale: boolean;
  /** A branch (rollout branch): the rollout it branched from and at which turn; null otherwise. */
  parent_rollout_id: string | null;
  branch_turn: number | null;
  /** How many tokens at the start of input_ids it shares with its parent and its siblings (the prompt of its first own turn); null when not a branch, 0 when it shares no turn. */
  prefix_length: number | null;
  /** group.branching: its advantage within each set of siblings it belongs to (a rollout that branched at a turn and its branches there). */
  sibling_advantages: { parent_rollout_id: string; branch_turn: number; advantage: number | null }[];
  /**
   * Which training segment of the rollout this sample is (0-based) and how many it has: a harness that
   * rewrote its history (a summary, a dropped reply) breaks the exact-prefix rule by design, and each
   * stretch of turns that extend one another is its own sample, with the rollout's reward and advantage.
   * 0 and 1 for a rollout whose turns all extend one another.
   */
  segment: number;
  segments: number;
  /** [first, end) of the attempt's turns this sample holds. */
  segment_turns: [number, number];
}

export interface SampleTokens {
  input_ids: number[];
  loss_mask: (0 | 1)[];
  logprobs: (number | null)[];
  temperatures: (number | null)[];
  logprob_mismatch: string | null;
  completion_spans: ([number, number] | null)[];
  unmasked_turns: number[];
}

/** [first, end) turn ranges of an attempt's training segments, given the turns that start a new one. */
export function segmentRanges(turns: number, segmentStarts: readonly number[] = []): [number, number][] {
  const starts = [0, ...segmentStarts.filter((t) => t > 0 && t < turns)].sort((a, b) => a - b);
  return starts.map((start, k) => [start, starts[k + 1] ?? turns]);
}

/** The token arrays of one attempt's turns (each with ids). */
export function assembleTokens(turns: readonly TurnTokens[]): SampleTokens {
  const last = turns.at(-1);
  if (!last) return { input_ids: [], loss_mask: [], logprobs: [], temperatures: [], logprob_mismatch: null, completion_spans: [], unmasked_turns: [] };
  const input_ids = [...last.promptIds, ...last.completionIds];
  const loss_mask: (0 | 1)[] = input_ids.map(() => 0);
  const logprobs: (number | null)[] = input_ids.map(() => null);
  const temperatures: (number | null)[] = input_ids.map(() => null);
  const mismatches = turns.map((t, k) => {
    const why = t.sampling === undefined ? 'recorded before the pipeline kept how tokens were sampled: which distribution its logprobs are of is unknown' : t.sampling.mismatch;
    return why === undefined ? undefined : `turn ${k}: ${why}`;
  });
  const completion_spans: ([number, number] | null)[] = [];
  const unmasked_turns: number[] = [];
  turns.forEach((t, k) => {
    const start = t.promptIds.length;
    const end = start + t.completionIds.length;
    const inPlace = end <= input_ids.length && t.completionIds.every((id, i) => input_ids[start + i] === id) && t.promptIds.every((id, i) => input_ids[i] === id);
    if (!inPlace) {
      completion_spans.push(null);
      unmasked_turns.push(k);
      return;
    }
    for (let i = 0; i < t.completionIds.length; i++) {
      loss_mask[start + i] = 1;
      logprobs[start + i] = t.completionLogprobs[i] ?? null;
      temperatures[start + i] = t.sampling?.params.temperature ?? null;
    }
    completion_spans.push([start, end]);
  });
  return { input_ids, loss_mask, logprobs, temperatures, logprob_mismatch: mismatches.find((m) => m !== undefined) ?? null, completion_spans, unmasked_turns };
}

/** What a trainer would check before using a sample; empty when it is sound. */
export function sampleProblems(s: Pick<TrainingSample, 'input_ids' | 'loss_mask' | 'logprobs' | 'completion_spans'> & Partial<Pick<TrainingSample, 'temperatures'>>): string[] {
  const problems: string[] = [];
  const n = s.input_ids.length;
  if (s.loss_mask.length !== n) problems.push(`loss_mask has ${s.loss_mask.length} entries for ${n} input_ids`);
  if (s.logprobs.length !== n) problems.push(`logprobs has ${s.logprobs.length} entries for ${n} input_ids`);
  if (s.temperatures !== undefined) {
    if (s.temperatures.length !== n) problems.push(`temperatures has ${s.temperatures.length} entries for ${n} input_ids`);
    s.temperatures.forEach((t, i) => {
      if (t !== null && !(t >= 0)) problems.push(`position ${i}: temperature ${t} is not a temperature`);
      if (t !== null && s.loss_mask[i] !== 1) problems.push(`position ${i}: a temperature where loss_mask is ${s.loss_mask[i]}`);
    });
  }
  s.input_ids.forEach((id, i) => {
    if (!Number.isInteger(id) || id < 0) problems.push(`input_ids[${i}] = ${id} is not a token id`);
    const masked = s.loss_mask[i] === 1;
    const lp = s.logprobs[i];
    if (masked !== (lp !== null && lp !== undefined)) problems.push(`position ${i}: loss_mask ${s.loss_mask[i]} but logprob ${lp}`);
    if (typeof lp === 'number' && !(lp <= 0)) problems.push(`position ${i}: logprob ${lp} is not <= 0`);
  });
  const spans = s.completion_spans.filter((x): x is [number, number] => x !== null);
  const covered = spans.reduce((sum, [a, b]) => sum + (b - a), 0);
  if (covered !== s.loss_mask.filter((m) => m === 1).length) problems.push(`completion spans cover ${covered} tokens, the loss mask ${s.loss_mask.filter((m) => m === 1).length}`);
  return problems;
}
