/**
 * The numbers of `rollout report`: per-stage timing percentiles, outcomes by
 * class and type, and the reward distribution per task, computed from a
 * batch's group results.
 */
import { batchMasked, groupMasked, type BatchMasked } from '../../shared/masking.js';
import type { GroupResult, MaskedSummary, StageTimings } from '../../shared/pipeline.js';
import { summarize, type Summary } from '../../shared/stats.js';

export const STAGES: (keyof StageTimings)[] = ['queueMs', 'provisionMs', 'agentMs', 'verifyMs', 'teardownMs'];

export interface TaskRewards {
  taskId: string;
  status: string;
  n: number;
  valid: number;
  mean: number | null;
  std: number | null;
  /** Reward value → how many valid rollouts got it. */
  histogram: [number, number][];
  masked: MaskedSummary;
}

/** One rollout as the report lists it (the HTML page links each to its own page). */
export interface RolloutRow {
  workflowId: string;
  taskId: string;
  index: number;
  reward: number | null;
  advantage: number | null;
  valid: boolean;
  outcomeClass: string;
  outcomeType: string;
  attempts: number;
  turns: number;
}

export interface BatchReport {
  batchId: string;
  groups: number;
  rollouts: number;
  rolloutRows: RolloutRow[];
  stages: Record<keyof StageTimings, Summary & { samples: number[] }>;
  outcomes: { outcomeClass: string; outcomeType: string; count: number }[];
  tasks: TaskRewards[];
  /** What the batch left out of its baselines, by class and type, and whether that is past the guard. */
  masked: BatchMasked;
}

export function buildReport(batchId: string, groups: GroupResult[]): BatchReport {
  const rollouts = groups.flatMap((g) => g.rollouts);
  const stages = Object.fromEntries(
    STAGES.map((stage) => {
      const samples = rollouts.map((r) => r.timings[stage]);
      return [stage, { ...summarize(samples), samples }];
    }),
  ) as BatchReport['stages'];
  const outcomeCounts = new Map<string, number>();
  for (const r of rollouts) outcomeCounts.set(`${r.outcomeClass}/${r.outcomeType}`, (outcomeCounts.get(`${r.outcomeClass}/${r.outcomeType}`) ?? 0) + 1);
  const outcomes = [...outcomeCounts]
    .map(([key, count]) => {
      const [outcomeClass = '', outcomeType = ''] = key.split('/');
      return { outcomeClass, outcomeType, count };
    })
    .sort((a, b) => b.count - a.count || a.outcomeClass.localeCompare(b.outcomeClass));
  const tasks = groups
    .map((g): TaskRewards => {
      const histogram = new Map<number, number>();
      for (const r of g.rollouts) if (r.valid && r.reward !== null) histogram.set(r.reward, (histogram.get(r.reward) ?? 0) + 1);
      return {
        taskId: g.taskId,
        status: g.status,
        n: g.rollouts.length,
        valid: g.validCount,
        mean: g.meanReward,
        std: g.stdReward,
        histogram: [...histogram].sort((a, b) => a[0] - b[0]),
        masked: groupMasked(g),
      };
    })
    .sort((a, b) => a.taskId.localeCompare(b.taskId));
  const rolloutRows = groups
    .flatMap((g) =>
      g.rollouts.map((r): RolloutRow => ({
        workflowId: r.workflowId,
        taskId: g.taskId,
        index: r.index,
        reward: r.reward,
        advantage: r.advantage,
        valid: r.valid,
        outcomeClass: r.outcomeClass,
        outcomeType: r.outcomeType,
        attempts: r.attempts,
        turns: r.turns,
      })),
    )
    .sort((a, b) => a.taskId.localeCompare(b.taskId) || a.index - b.index);
  return { batchId, groups: groups.length, rollouts: rollouts.length, rolloutRows, stages, outcomes, tasks, masked: batchMasked(groups) };
}

export function reportText(report: BatchReport): string {
  const lines: string[] = [`batch ${report.batchId}: ${report.groups} groups, ${report.rollouts} rollouts`, '', 'stage       p50 ms    p95 ms    max ms'];
  for (const stage of STAGES) {
    const s = report.stages[stage];
    const max = s.samples.length ? Math.max(...s.samples) : Number.NaN;
    lines.push(`${stage.replace('Ms', '').padEnd(10)}  ${s.p50.toFixed(0).padStart(6)}    ${s.p95.toFixed(0).padStart(6)}    ${max.toFixed(0).padStart(6)}`);
  }
  lines.push('', 'outcome                               count');
  for (const o of report.outcomes) lines.push(`${`${o.outcomeClass}/${o.outcomeType}`.padEnd(36)}  ${String(o.count).padStart(5)}`);
  lines.push('', 'masked (left out of the baseline)      count');
  const m = report.masked.masked;
  for (const [cls, n] of Object.entries(m.byClass).sort((a, b) => b[1] - a[1])) lines.push(`  class ${cls.padEnd(30)}  ${String(n).padStart(5)}`);
  for (const [type, n] of Object.entries(m.byType).sort((a, b) => b[1] - a[1])) lines.push(`  ${type.padEnd(36)}  ${String(n).padStart(5)}`);
  lines.push(report.masked.line);
  lines.push('', 'task                 status        valid  masked  mean   std    rewards (value×count)');
  for (const t of report.tasks) {
    const fmt = (n: number | null): string => (n === null ? '-' : n.toFixed(2));
    const masked = `${Math.round(t.masked.fraction * 100)}%`;
    lines.push(
      `${t.taskId.padEnd(20)} ${t.status.padEnd(13)} ${`${t.valid}/${t.n}`.padEnd(6)} ${masked.padEnd(7)} ${fmt(t.mean).padEnd(6)} ${fmt(t.std).padEnd(6)} ${t.histogram.map(([v, c]) => `${v}×${c}`).join(' ')}`,
    );
  }
  return lines.join('\n');
}
