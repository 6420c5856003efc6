/** The table `rollout run` and `rollout status` print: one line per group, then the batch totals. */
import { batchMasked, groupMasked } from '../../shared/masking.js';
import type { GroupResult } from '../../shared/pipeline.js';

const fmt = (n: number | null): string => (n === null ? '-' : n.toFixed(2));

/** `0` or `2/4 (50%)`, the fraction of the group left out of its baseline. */
function maskedCell(g: GroupResult): string {
  const m = groupMasked(g);
  return m.count === 0 ? '0' : `${m.count}/${g.rollouts.length} (${Math.round(m.fraction * 100)}%)`;
}

export function summaryTable(groups: GroupResult[]): string {
  const rows = [['task', 'status', 'valid', 'mean', 'std', 'rewards', 'outcomes', 'masked']];
  for (const g of groups) {
    const outcomes = new Map<string, number>();
    for (const r of g.rollouts) outcomes.set(`${r.outcomeClass}/${r.outcomeType}`, (outcomes.get(`${r.outcomeClass}/${r.outcomeType}`) ?? 0) + 1);
    rows.push([
      g.taskId,
      g.status,
      `${g.validCount}/${g.groupSize}`,
      fmt(g.meanReward),
      fmt(g.stdReward),
      g.rollouts.map((r) => (r.reward === null ? 'x' : String(Math.round(r.reward * 100) / 100))).join(' '),
      [...outcomes].map(([k, v]) => `${k}:${v}`).join(' '),
      maskedCell(g),
    ]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const lines = rows.map((r) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd());
  const all = groups.flatMap((g) => g.rollouts);
  const valid = all.filter((r) => r.valid && r.reward !== null);
  const mean = valid.length ? valid.reduce((a, r) => a + (r.reward ?? 0), 0) / valid.length : null;
  const byClass = new Map<string, number>();
  for (const r of all) byClass.set(r.outcomeClass, (byClass.get(r.outcomeClass) ?? 0) + 1);
  lines.push('');
  lines.push(`${groups.length} groups, ${all.length} rollouts, ${valid.length} valid, mean reward ${fmt(mean)}; by class: ${[...byClass].map(([k, v]) => `${k} ${v}`).join(', ')}`);
  lines.push(batchMasked(groups).line);
  return lines.join('\n');
}
