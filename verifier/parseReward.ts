/**
 * Reads the reward a task's tests/test.sh wrote: /logs/verifier/reward.json (a
 * dict of named rewards: `{"reward": n, ...other metrics}`, or one named value,
 * or a bare number), which wins over reward.txt (one number), as in Harbor. A
 * missing, empty or malformed reward is a verifier crash (infra), never a zero.
 */
import { ClassifiedError } from '../shared/failures.js';

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
  if (reward === undefined) {
    const keys = Object.keys(parsed);
    throw crashed(
      keys.length === 0
        ? 'reward.json is an empty object: no reward'
        : `reward.json names ${keys.length} values (${keys.join(', ')}) and none is "reward": which one is the reward is ambiguous; write {"reward": n, ...}`,
    );
  }
  return { reward, metrics, source: 'reward.json' };
}
