/**
 * Staleness of a finished group (async RL): each rollout's staleness is the
 * group's policy version at the end minus the oldest version among its turns.
 * Past staleness.maxStaleness a rollout is tagged stale; with onStale
 * drop_group the whole group is dropped (no rollout valid) and the reason says
 * which rollout and by how much. Deterministic; the workflow calls it.
 */
import type { RolloutResult, Staleness } from '../shared/pipeline.js';

export function applyStaleness(rollouts: RolloutResult[], current: number, staleness: Staleness | undefined): { dropped: string | null } {
  const max = staleness?.maxStaleness;
  let worst: RolloutResult | null = null;
  for (const r of rollouts) {
    const versions = r.policyVersions ?? [];
    r.staleness = versions.length > 0 ? current - Math.min(...versions) : null;
    r.stale = max !== undefined && r.staleness !== null && r.staleness > max;
    if (r.stale && (worst === null || (r.staleness ?? 0) > (worst.staleness ?? 0))) worst = r;
  }
  if (!worst || staleness?.onStale !== 'drop_group') return { dropped: null };
  for (const r of rollouts) r.valid = false;
  return {
    dropped: `rollout ${worst.index} has turns from policy version ${current - (worst.staleness ?? 0)}, ${worst.staleness} behind the current ${current} (maxStaleness ${max}); the group was dropped (staleness.onStale drop_group)`,
  };
}
