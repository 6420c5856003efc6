/**
 * The text of batch progress: one line per group (done/running/failed, rewards
 * so far) and a batch line with an ETA. Pure: the same states give the same lines.
 */
import type { GroupState } from './groupState.js';

export interface BatchCounts {
  total: number;
  done: number;
  running: number;
  failed: number;
  groupsClosed: number;
}

export function countBatch(groups: readonly GroupState[]): BatchCounts {
  const counts: BatchCounts = { total: 0, done: 0, running: 0, failed: 0, groupsClosed: 0 };
  for (const g of groups) {
    counts.total += g.groupSize;
    counts.done += g.finished;
    counts.failed += g.rewards.filter((r) => r === null).length;
    if (!g.closed) counts.running += g.groupSize - g.finished;
    if (g.closed) counts.groupsClosed++;
  }
  return counts;
}

const reward = (r: number | null | undefined): string => (r === undefined ? '·' : r === null ? 'x' : String(Math.round(r * 100) / 100));

export function formatSeconds(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}

/** One line per group: task, status, rollouts done/running/failed, each rollout's reward (· running, x no valid reward). */
export function groupLines(groups: readonly GroupState[]): string[] {
  const width = Math.max(4, ...groups.map((g) => g.taskId.length));
  return groups.map((g) => {
    const failed = g.rewards.filter((r) => r === null).length;
    const running = g.closed ? 0 : g.groupSize - g.finished;
    const counts = `${g.finished}/${g.groupSize} done${running ? `, ${running} running` : ''}${failed ? `, ${failed} failed` : ''}`;
    return `  ${g.taskId.padEnd(width)}  ${g.status.padEnd(12)}  ${counts.padEnd(28)}  rewards ${g.rewards.map(reward).join(' ')}`;
  });
}

/** The batch line: rollouts done of total, running, failed, groups finished, elapsed time and an ETA from the rate so far. */
export function batchLine(batchId: string, groups: readonly GroupState[], elapsedMs: number): string {
  const c = countBatch(groups);
  let eta = '';
  if (c.groupsClosed === groups.length && groups.length > 0) eta = 'finished';
  else if (c.done > 0) eta = `ETA ${formatSeconds(((c.total - c.done) * elapsedMs) / c.done)}`;
  else eta = 'ETA after the first rollout';
  return `batch ${batchId}: ${c.done}/${c.total} rollouts done, ${c.running} running, ${c.failed} failed · ${c.groupsClosed}/${groups.length} groups finished · ${formatSeconds(elapsedMs)} elapsed, ${eta}`;
}
