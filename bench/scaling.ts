/**
 * Section 4: cost per rollout as concurrency grows (10 → 100 → 1,000 by
 * default), with the 2 s policy of section 3 and one worker setting: per
 * rollout, wall time, latency against the ideal, CPU (worker, sandboxes,
 * dev server, bench) and worker memory. A point section 3 already measured
 * with the same setting is reused, not run twice.
 */
import type { BenchContext } from './context.js';
import { diagnose, measureIdeal, type ConcurrencyResult, type Ideal } from './concurrency.js';
import { SETUPS, type SetupName } from './workerSetups.js';
import { slim, type PipelineSummary } from './orchestration.js';
import { runPipelineBatch } from './pipelineRun.js';
import { formatTable } from './stats.js';
import { benchPolicy, startBenchPolicyServer } from './workload.js';
import { cpus } from 'node:os';

export interface ScalingPoint {
  concurrency: number;
  run: PipelineSummary;
  reused: boolean;
  completionOverIdeal: number;
  wallMsPerRollout: number;
  limits: string[];
}

export interface ScalingResult {
  groupSize: number;
  delayMs: number;
  setup: SetupName;
  ideal: Ideal;
  points: ScalingPoint[];
}

export async function runScaling(
  ctx: BenchContext,
  options: { concurrencies: number[]; groupSize: number; delayMs: number; setup: SetupName; db: 'memory' | 'file'; reuse?: ConcurrencyResult; deadlineMs?: number },
): Promise<ScalingResult> {
  const reuse = options.reuse && options.reuse.delayMs === options.delayMs && options.reuse.groupSize === options.groupSize ? options.reuse : undefined;
  const ideal: Ideal = reuse?.ideal ?? (await measureIdeal(ctx, options.delayMs));
  const server = await startBenchPolicyServer(options.delayMs);
  try {
    const env = { scratch: ctx.scratch, taskDirs: ctx.taskDirs, bundleFile: ctx.bundleFile, ...(ctx.placement ? { placement: ctx.placement } : {}), policy: benchPolicy(server), policyServer: server };
    const points: ScalingPoint[] = [];
    for (const concurrency of options.concurrencies) {
      const groups = Math.max(1, Math.ceil(concurrency / options.groupSize));
      const earlier = reuse?.runs.find((x) => x.setup === options.setup && x.run.rollouts === groups * options.groupSize && x.run.db === options.db);
      const run =
        earlier?.run ??
        slim(
          await runPipelineBatch(
            env,
            {
              label: `scaling-${concurrency}`,
              groups,
              groupSize: options.groupSize,
              setup: SETUPS[options.setup],
              db: options.db,
              ...(options.deadlineMs ? { deadlineMs: options.deadlineMs } : {}),
            },
            ctx.log,
          ),
        );
      points.push({
        concurrency: run.rollouts,
        run,
        reused: earlier !== undefined,
        completionOverIdeal: run.projectedWallMs / ideal.totalMs,
        wallMsPerRollout: run.wallMs / Math.max(1, run.completed),
        limits: diagnose(run, ideal.totalMs, cpus().length),
      });
    }
    return { groupSize: options.groupSize, delayMs: options.delayMs, setup: options.setup, ideal, points };
  } finally {
    await server.close();
  }
}

const f0 = (n: number): string => n.toFixed(0);
const f2 = (n: number): string => n.toFixed(2);

export function formatScaling(r: ScalingResult): string {
  const lines = [
    `groups of ${r.groupSize}, policy latency ${r.delayMs} ms, worker settings "${r.setup}"; ideal completion ${f0(r.ideal.totalMs)} ms at any concurrency`,
    formatTable(
      [
        'concurrency',
        'completion / ideal',
        'rollouts/s',
        'wall ms / rollout',
        'p50 / ideal',
        'p95 / ideal',
        'CPU ms / rollout',
        'worker',
        'sandboxes',
        'server',
        'bench',
        'CPU used (machine)',
        'worker peak RSS MiB',
        'RSS KiB / rollout',
        'errors',
        'leaks',
      ],
      r.points.map((p) => [
        `${p.concurrency}${p.reused ? ' (sec. 3)' : ''}`,
        `${f2(p.completionOverIdeal)} x${p.run.finished ? '' : ' (projected)'}`,
        f2(p.run.rolloutsPerSecond),
        f0(p.wallMsPerRollout),
        `${f2(p.run.e2e.p50 / r.ideal.totalMs)} x`,
        `${f2(p.run.e2e.p95 / r.ideal.totalMs)} x`,
        f0(p.run.cpuMsPerRollout),
        f0(p.run.cpuMs.worker / Math.max(1, p.run.completed)),
        f0(p.run.cpuMs.sandboxes / Math.max(1, p.run.completed)),
        f0(p.run.cpuMs.server / Math.max(1, p.run.completed)),
        f0(p.run.cpuMs.bench / Math.max(1, p.run.completed)),
        `${f0(p.run.cpuUtilization * 100)}% (${f0(p.run.machineBusy * 100)}%)`,
        (p.run.workerPeakRssKb / 1024).toFixed(0),
        f0(p.run.workerPeakRssKb / p.run.rollouts),
        String(p.run.errors),
        String(p.run.leaks),
      ]),
    ),
  ];
  for (const p of r.points) lines.push(`${p.concurrency}: ${p.limits.join('; ')}`);
  return lines.join('\n');
}
