/**
 * GRPO advantages: each valid rollout's reward minus the group mean, divided
 * by the group's standard deviation unless disabled. Excluded rollouts get
 * null and do not move the baseline. Pure and deterministic.
 */
export interface AdvantageStats {
  mean: number | null;
  std: number | null;
  advantages: (number | null)[];
}

const EPSILON = 1e-6;

export function computeAdvantages(rewards: (number | null)[], valid: boolean[], scaleByStd: boolean): AdvantageStats {
  const counted = rewards.filter((r, i): r is number => valid[i] === true && r !== null);
  if (counted.length === 0) return { mean: null, std: null, advantages: rewards.map(() => null) };
  const mean = counted.reduce((a, b) => a + b, 0) / counted.length;
  const std = Math.sqrt(counted.reduce((a, b) => a + (b - mean) ** 2, 0) / counted.length);
  const advantages = rewards.map((r, i) => {
    if (valid[i] !== true || r === null) return null;
    const centred = r - mean;
    return scaleByStd ? centred / (std + EPSILON) : centred;
  });
  return { mean, std, advantages };
}

/** The fields of a rollout that place it in a tree (group.branching). */
interface TreeMember {
  workflowId: string;
  reward: number | null;
  valid: boolean;
  branch?: { parentRolloutId: string; atTurn: number };
}

/**
 * Advantages within each set of siblings of a tree (group.branching): a rollout that branched at a
 * turn and the branches it started there all continued from the same state, so each set is a GRPO
 * group of its own. Returns, per rollout (in order), its advantage in every set it belongs to.
 */
export function siblingAdvantages(rollouts: readonly TreeMember[], scaleByStd: boolean): { parentRolloutId: string; atTurn: number; advantage: number | null }[][] {
  const sets = new Map<string, { parentRolloutId: string; atTurn: number; members: number[] }>();
  rollouts.forEach((r, i) => {
    if (!r.branch) return;
    const key = `${r.branch.parentRolloutId}\u0000${r.branch.atTurn}`;
    let set = sets.get(key);
    if (!set) {
      const parent = rollouts.findIndex((p) => p.workflowId === r.branch?.parentRolloutId);
      set = { parentRolloutId: r.branch.parentRolloutId, atTurn: r.branch.atTurn, members: parent >= 0 ? [parent] : [] };
      sets.set(key, set);
    }
    set.members.push(i);
  });
  const out: { parentRolloutId: string; atTurn: number; advantage: number | null }[][] = rollouts.map(() => []);
  for (const set of sets.values()) {
    const stats = computeAdvantages(
      set.members.map((i) => rollouts[i]?.reward ?? null),
      set.members.map((i) => rollouts[i]?.valid === true),
      scaleByStd,
    );
    set.members.forEach((i, k) => out[i]?.push({ parentRolloutId: set.parentRolloutId, atTurn: set.atTurn, advantage: stats.advantages[k] ?? null }));
  }
  return out;
}
