/**
 * Reads one rollout's trajectory back from the store: per attempt the
 * instruction and tools, every turn's assistant message (with token data when
 * the server returned it) and tool results, and the verifier's outcome. What a
 * trainer needs to build training samples from a group result.
 */
import type { AttemptMeta, PolicyTurnRecord, ToolTurnRecord } from '../agent/conversation.js';
import { turnTokensOf } from '../policies/tokens/turnTokensOf.js';
import { attemptPrefix, type TrajectoryStore } from '../stores/trajectoryStore.js';

export interface TrajectoryTurn {
  policy: PolicyTurnRecord;
  tools: ToolTurnRecord[];
}

export interface TrajectoryAttempt {
  attempt: number;
  meta: AttemptMeta;
  turns: TrajectoryTurn[];
  verify: Record<string, unknown> | undefined;
}

/** What the store has of one attempt; undefined when the attempt never reached a sandbox (no meta.json). */
export async function loadAttempt(store: TrajectoryStore, ref: string, attempt: number): Promise<TrajectoryAttempt | undefined> {
  const prefix = attemptPrefix(attempt);
  const meta = await store.get<AttemptMeta>(ref, `${prefix}meta.json`);
  if (!meta) return undefined;
  const names = await store.list(ref, prefix);
  const turns: TrajectoryTurn[] = [];
  for (const name of names.filter((n) => n.endsWith('.policy.json'))) {
    const stored = await store.get<PolicyTurnRecord>(ref, name);
    if (!stored) continue;
    // Records of either shape (tokens/turnTokensOf.ts) come back with their ids in turnTokens.
    const ids = turnTokensOf(stored);
    const policy: PolicyTurnRecord = ids ? { ...stored, turnTokens: ids } : stored;
    const toolNames = names.filter((n) => n.startsWith(name.replace('.policy.json', '.tool-')));
    const tools: ToolTurnRecord[] = [];
    for (const t of toolNames) {
      const tool = await store.get<ToolTurnRecord>(ref, t);
      if (tool) tools.push(tool);
    }
    turns.push({ policy, tools });
  }
  return { attempt, meta, turns, verify: await store.get<Record<string, unknown>>(ref, `${prefix}verify.json`) };
}

/**
 * Every attempt the store has, in order. With `attempts` (the rollout's
 * attempt count) an attempt that never reached a sandbox is skipped and later
 * ones are still read; without it, reading stops at the first such attempt.
 */
export async function loadTrajectory(store: TrajectoryStore, ref: string, attempts?: number): Promise<TrajectoryAttempt[]> {
  const out: TrajectoryAttempt[] = [];
  for (let attempt = 0; attempts === undefined || attempt < attempts; attempt++) {
    const loaded = await loadAttempt(store, ref, attempt);
    if (loaded) out.push(loaded);
    else if (attempts === undefined) break;
  }
  return out;
}
