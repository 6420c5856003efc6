/** The table `rollout run` and `rollout status` print: one line per group, then the batch totals. */
import type { GroupResult } from '../../shared/pipeline.js';

const fmt = (n: number | null): string => (n === null ? '-' : n.toFixed(2));

export function summaryTable(groups: GroupResult[]): string {
  const rows = [['task', 'status', 'valid', 'mean', 'std', 'rewards', 'outcomes']];
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
  return lines.join('\n');
}
