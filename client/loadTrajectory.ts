/**
 * Reads one rollout's trajectory back from the store: per attempt the
 * instruction and tools, every turn's assistant message (with token data when
 * the server returned it) and tool results, and the verifier's outcome. What a
 * trainer needs to build training samples from a group result.
 */
import type { AttemptMeta, PolicyTurnRecord, ToolTurnRecord } from '../activities/agent/conversation.js';
import { attemptPrefix, type TrajectoryStore } from '../activities/store/trajectoryStore.js';

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

export async function loadTrajectory(store: TrajectoryStore, ref: string): Promise<TrajectoryAttempt[]> {
  const attempts: TrajectoryAttempt[] = [];
  for (let attempt = 0; ; attempt++) {
    const prefix = attemptPrefix(attempt);
    const meta = await store.get<AttemptMeta>(ref, `${prefix}meta.json`);
    if (!meta) break;
    const names = await store.list(ref, prefix);
    const turns: TrajectoryTurn[] = [];
    for (const name of names.filter((n) => n.endsWith('.policy.json'))) {
      const policy = await store.get<PolicyTurnRecord>(ref, name);
      if (!policy) continue;
      const toolNames = names.filter((n) => n.startsWith(name.replace('.policy.json', '.tool-')));
      const tools: ToolTurnRecord[] = [];
      for (const t of toolNames) {
        const tool = await store.get<ToolTurnRecord>(ref, t);
        if (tool) tools.push(tool);
      }
      turns.push({ policy, tools });
    }
    attempts.push({ attempt, meta, turns, verify: await store.get<Record<string, unknown>>(ref, `${prefix}verify.json`) });
  }
  return attempts;
}
