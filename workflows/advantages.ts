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
