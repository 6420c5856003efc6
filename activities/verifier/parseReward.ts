/**
 * Reads the reward a task's tests/test.sh wrote: /logs/verifier/reward.txt (one
 * number) or reward.json (`{"reward": n, ...other metrics}` or a single
 * numeric value). A missing or malformed reward is a verifier crash (infra),
 * never a zero.
 */
import { ClassifiedError } from '../../shared/failures.js';

export interface Reward {
  reward: number;
  metrics: Record<string, number>;
  source: 'reward.txt' | 'reward.json';
}

function crashed(message: string): ClassifiedError<'infra'> {
  return new ClassifiedError('infra', 'verifier_crashed', message);
}

export function parseRewardTxt(text: string): Reward {
  const trimmed = text.trim();
  const value = Number(trimmed);
  if (trimmed === '' || !Number.isFinite(value)) throw crashed(`reward.txt holds ${JSON.stringify(trimmed.slice(0, 100))}, not a number`);
  return { reward: value, metrics: {}, source: 'reward.txt' };
}

export function parseRewardJson(text: string): Reward {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw crashed(`reward.json is not JSON: ${JSON.stringify(text.slice(0, 100))}`);
  }
  if (typeof parsed === 'number' && Number.isFinite(parsed)) return { reward: parsed, metrics: {}, source: 'reward.json' };
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw crashed('reward.json must be an object such as {"reward": 1}');
  const metrics: Record<string, number> = {};
  for (const [key, value] of Object.entries(parsed)) if (typeof value === 'number' && Number.isFinite(value)) metrics[key] = value;
  const entries = Object.entries(metrics);
  const reward = metrics.reward ?? (entries.length === 1 ? entries[0]?.[1] : undefined);
  if (reward === undefined) throw crashed(`reward.json has no numeric "reward" (keys: ${Object.keys(parsed).join(', ') || 'none'})`);
  return { reward, metrics, source: 'reward.json' };
}
