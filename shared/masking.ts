/**
 * The guard on masking: how much of a group or batch was left out of its
 * baseline, by outcome class and type. Masking removes a rollout's reward
 * from its group's advantages, so a policy that could make attempts end
 * masked could dodge low rewards; these numbers make that visible and
 * `failurePolicy.maxMaskedFraction` bounds it. Pure: workflows import it.
 */
import type { GroupResult, MaskedSummary, RolloutResult } from './pipeline.js';

/** The threshold when a group result does not say (groups that ran before it was recorded): the default policy's. */
const DEFAULT_MAX_MASKED_FRACTION = 0.5;

export function maskedSummary(rollouts: readonly Pick<RolloutResult, 'valid' | 'outcomeClass' | 'outcomeType'>[]): MaskedSummary {
  const byClass: Record<string, number> = {};
  const byType: Record<string, number> = {};
  let count = 0;
  for (const r of rollouts) {
    if (r.valid) continue;
    count++;
    byClass[r.outcomeClass] = (byClass[r.outcomeClass] ?? 0) + 1;
    const name = `${r.outcomeClass}/${r.outcomeType}`;
    byType[name] = (byType[name] ?? 0) + 1;
  }
  return { count, fraction: rollouts.length === 0 ? 0 : count / rollouts.length, byClass, byType };
}

/** Sums group summaries into one for a batch (fraction over all rollouts). */
export function combineMasked(groups: readonly { masked: MaskedSummary; rollouts: number }[]): MaskedSummary {
  const byClass: Record<string, number> = {};
  const byType: Record<string, number> = {};
  let count = 0;
  let total = 0;
  for (const g of groups) {
    count += g.masked.count;
    total += g.rollouts;
    for (const [k, v] of Object.entries(g.masked.byClass)) byClass[k] = (byClass[k] ?? 0) + v;
    for (const [k, v] of Object.entries(g.masked.byType)) byType[k] = (byType[k] ?? 0) + v;
  }
  return { count, fraction: total === 0 ? 0 : count / total, byClass, byType };
}

/** `2 of 4 (50%): infra/sandbox_lost 1, infra/provision_failed 1`. */
export function describeMasked(m: MaskedSummary, total: number): string {
  const types = Object.entries(m.byType)
    .sort((a, b) => b[1] - a[1])
    .map(([t, n]) => `${t} ${n}`)
    .join(', ');
  return `${m.count} of ${total} (${Math.round(m.fraction * 100)}%)${types ? `: ${types}` : ''}`;
}

/** A group's masked summary, recomputed from its rollouts for results that ran before it was recorded. */
export function groupMasked(g: Pick<GroupResult, 'masked' | 'rollouts'>): MaskedSummary {
  return g.masked ?? maskedSummary(g.rollouts);
}

export interface BatchMasked {
  masked: MaskedSummary;
  /** The strictest maxMaskedFraction of the batch's groups. */
  maxFraction: number;
  /** More of the batch is masked than that: its rewards are not to be trusted as a whole. */
  flagged: boolean;
  /** One line for `rollout status` and the report. */
  line: string;
}

export function batchMasked(groups: readonly Pick<GroupResult, 'masked' | 'rollouts'>[]): BatchMasked {
  const masked = combineMasked(groups.map((g) => ({ masked: groupMasked(g), rollouts: g.rollouts.length })));
  const limits = groups.map((g) => g.masked?.maxFraction).filter((f): f is number => f !== undefined);
  const maxFraction = limits.length > 0 ? Math.min(...limits) : DEFAULT_MAX_MASKED_FRACTION;
  const flagged = masked.fraction > maxFraction;
  const total = groups.reduce((n, g) => n + g.rollouts.length, 0);
  const line = `masked ${describeMasked(masked, total)}${flagged ? `: FLAGGED, more than maxMaskedFraction ${maxFraction} of the batch is masked` : ''}`;
  return { masked, maxFraction, flagged, line };
}
