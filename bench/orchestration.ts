/**
 * Section 2: orchestration overhead. A 5-turn rollout with a zero-latency
 * scripted policy (real HTTP, real wire format), end to end through the real
 * Temporal dev server, against a bare in-process loop doing the same sandbox
 * and policy work without Temporal (bench/bareLoop.ts), at the same
 * concurrency: every rollout of a batch at once. Per-rollout p50/p95, the
 * ratio, and throughput for groups of 8 at batch sizes 8, 32 and 128
 * rollouts. One extra pipeline run of the largest batch on a file-backed
 * SQLite server shows what persistence costs.
 */
import { join } from 'node:path';
import { LocalSandboxProvider } from '../sandboxes/local/localSandboxProvider.js';
import { FsTrajectoryStore } from '../stores/fsTrajectoryStore.js';
import type { Summary } from '../shared/stats.js';
import { summarize } from '../shared/stats.js';
import { runBareBatch, type BareBatch, type BareOptions } from './bareLoop.js';
import type { BenchContext } from './context.js';
import { SETUPS, type SetupName } from './workerSetups.js';
import { runPipelineBatch } from './pipelineRun.js';
import type { PipelineRunResult } from './pipelineRunResult.js';
import { formatTable } from './stats.js';
import { benchPolicy, startBenchPolicyServer } from './workload.js';

export interface BareSummary {
  rollouts: number;
  e2e: Summary;
  stages: { provision: number; agent: number; verify: number; teardown: number };
  wallMs: number;
  rolloutsPerSecond: number;
  cpuMsPerRollout: number;
  errors: number;
}

export function summarizeBare(b: BareBatch): BareSummary {
  const p50 = (f: (r: BareBatch['rollouts'][number]) => number): number => summarize(b.rollouts.map(f)).p50;
  return {
    rollouts: b.rollouts.length,
    e2e: summarize(b.rollouts.map((r) => r.totalMs)),
    stages: { provision: p50((r) => r.provisionMs), agent: p50((r) => r.agentMs), verify: p50((r) => r.verifyMs), teardown: p50((r) => r.teardownMs) },
    wallMs: b.wallMs,
    rolloutsPerSecond: b.rollouts.length / (b.wallMs / 1000),
    cpuMsPerRollout: (b.cpu.selfMs + b.cpu.childrenMs) / b.rollouts.length,
    errors: b.rollouts.filter((r) => r.error !== null || r.reward !== 1).length,
  };
}

/** A slimmer pipeline result for the JSON: what the tables and the analysis use. */
export type PipelineSummary = Omit<PipelineRunResult, 'leakDetail'> & { leakDetail?: PipelineRunResult['leakDetail'] };

export function slim(r: PipelineRunResult): PipelineSummary {
  const { leakDetail, ...rest } = r;
  return r.leaks > 0 ? { ...rest, leakDetail } : rest;
}

export interface OrchestrationRow {
  batch: number;
  bare: BareSummary;
  bareWithStore: BareSummary;
  pipeline: PipelineSummary;
  p50Ratio: number;
  p95Ratio: number;
  throughputRatio: number;
}

export interface OrchestrationResult {
  groupSize: number;
  setup: SetupName;
  db: 'memory' | 'file';
  /** One bare rollout at a time: the floor of a rollout's latency. */
  bareAlone: BareSummary;
  rows: OrchestrationRow[];
  /** The largest batch again on a server whose SQLite is a file. */
  fileDb: PipelineSummary | null;
}

export async function bareEnvironment(ctx: BenchContext, name: string, policy: BareOptions['policy']): Promise<(store: boolean) => BareOptions> {
  const provider = new LocalSandboxProvider({ stateRoot: join(ctx.scratch, 'bare', name, 'sandboxes') });
  const store = new FsTrajectoryStore(join(ctx.scratch, 'bare', name, 'trajectories'));
  const taskDir = ctx.taskDirs[0] as string;
  // Warm up: host capability checks, the HTTP connection, the page cache.
  await runBareBatch({ provider, taskDir, policy, batchId: `${name}-warmup` }, 1);
  let n = 0;
  return (withStore) => ({ provider, taskDir, policy, batchId: `${name}-${n++}`, ...(withStore ? { store } : {}) });
}

export async function runOrchestration(ctx: BenchContext, options: { batches: number[]; groupSize: number; setup: SetupName; db: 'memory' | 'file' }): Promise<OrchestrationResult> {
  const server = await startBenchPolicyServer(0);
  try {
    const policy = benchPolicy(server);
    const bare = await bareEnvironment(ctx, 'orchestration', policy);
    const bareAlone = summarizeBare(await runBareBatch(bare(false), 8, 1));
    ctx.log(`  bare loop, one rollout at a time: p50 ${bareAlone.e2e.p50.toFixed(0)} ms`);
    const env = { scratch: ctx.scratch, taskDirs: ctx.taskDirs, bundleFile: ctx.bundleFile, ...(ctx.placement ? { placement: ctx.placement } : {}), policy, policyServer: server };
    const rows: OrchestrationRow[] = [];
    for (const batch of options.batches) {
      const groups = Math.max(1, Math.round(batch / options.groupSize));
      const b = summarizeBare(await runBareBatch(bare(false), groups * options.groupSize));
      const bs = summarizeBare(await runBareBatch(bare(true), groups * options.groupSize));
      const p = slim(await runPipelineBatch(env, { label: `orchestration-${batch}`, groups, groupSize: options.groupSize, setup: SETUPS[options.setup], db: options.db, warmup: true }, ctx.log));
      ctx.log(`  batch ${batch}: bare p50 ${b.e2e.p50.toFixed(0)} ms, pipeline p50 ${p.e2e.p50.toFixed(0)} ms, ${p.errors} errors, ${p.leaks} leaks`);
      rows.push({
        batch: groups * options.groupSize,
        bare: b,
        bareWithStore: bs,
        pipeline: p,
        p50Ratio: p.e2e.p50 / b.e2e.p50,
        p95Ratio: p.e2e.p95 / b.e2e.p95,
        throughputRatio: p.rolloutsPerSecond / b.rolloutsPerSecond,
      });
    }
    const largest = rows.at(-1);
    let fileDb: PipelineSummary | null = null;
    if (largest && options.db === 'memory') {
      fileDb = slim(
        await runPipelineBatch(
          env,
          {
            label: `orchestration-${largest.batch}-file`,
            groups: largest.batch / options.groupSize,
            groupSize: options.groupSize,
            setup: SETUPS[options.setup],
            db: 'file',
            warmup: true,
          },
          ctx.log,
        ),
      );
    }
    return { groupSize: options.groupSize, setup: options.setup, db: options.db, bareAlone, rows, fileDb };
  } finally {
    await server.close();
  }
}

const f0 = (n: number): string => n.toFixed(0);
const f2 = (n: number): string => n.toFixed(2);

/** The history breakdown of pipeline runs, one row each. */
export function formatBreakdowns(runs: [string, PipelineSummary][]): string {
  const a = (b: NonNullable<PipelineSummary['breakdown']>, name: string): string => f0(b.activityRunMs[name] ?? 0);
  return [
    'where a pipeline rollout\'s time goes (mean ms per rollout over sampled histories; "wait" = scheduled until a worker started it)',
    formatTable(
      ['run', 'sampled', 'total', 'provision', 'policy x5', 'tool x5', 'verify', 'teardown', 'activity wait', 'workflow tasks', 'activity tasks', 'round trips', 'wft wait', 'wft run', 'other'],
      runs.flatMap(([name, p]) => {
        const b = p.breakdown;
        if (!b) return [];
        return [
          [
            name,
            String(b.sampled),
            f0(b.totalMs),
            a(b, 'provisionSandbox'),
            a(b, 'policyStep'),
            f0((b.activityRunMs.runTool ?? 0) + (b.activityRunMs.runTools ?? 0)),
            a(b, 'verifyAttempt'),
            a(b, 'teardownSandbox'),
            f0(b.activityWaitMs),
            b.workflowTasks.toFixed(1),
            b.activityTasks.toFixed(1),
            (b.workflowTasks + b.activityTasks).toFixed(1),
            f0(b.workflowTaskWaitMs),
            f0(b.workflowTaskRunMs),
            f0(b.otherMs),
          ],
        ];
      }),
    ),
  ].join('\n');
}

export function formatOrchestration(r: OrchestrationResult): string {
  const lines = [
    `per-rollout end to end (ms) and throughput, groups of ${r.groupSize}, all rollouts of a batch at once; worker settings "${r.setup}", dev server SQLite ${r.db}`,
    formatTable(
      ['batch', 'bare p50', 'bare p95', '+store p50', 'pipeline p50', 'pipeline p95', 'p50 ratio', 'p95 ratio', 'bare r/s', 'pipeline r/s', 'r/s ratio', 'errors', 'leaks'],
      r.rows.map((x) => [
        String(x.batch),
        f0(x.bare.e2e.p50),
        f0(x.bare.e2e.p95),
        f0(x.bareWithStore.e2e.p50),
        f0(x.pipeline.e2e.p50),
        f0(x.pipeline.e2e.p95),
        `${f2(x.p50Ratio)} x`,
        `${f2(x.p95Ratio)} x`,
        f2(x.bare.rolloutsPerSecond),
        f2(x.pipeline.rolloutsPerSecond),
        `${f2(x.throughputRatio)} x`,
        String(x.pipeline.errors + x.bare.errors + x.bareWithStore.errors),
        String(x.pipeline.leaks),
      ]),
    ),
    '',
    'where a rollout spends its time (p50 ms; pipeline stages from RolloutResult.timings, queue = start until its sandbox exists)',
    formatTable(
      ['batch', 'side', 'queue', 'provision', 'agent (5 turns)', 'verify', 'teardown', 'CPU ms/rollout', 'CPU used (machine)'],
      r.rows.flatMap((x) => [
        [String(x.batch), 'bare', '-', f0(x.bare.stages.provision), f0(x.bare.stages.agent), f0(x.bare.stages.verify), f0(x.bare.stages.teardown), f0(x.bare.cpuMsPerRollout), ''],
        [String(x.batch), 'bare + store', '-', f0(x.bareWithStore.stages.provision), f0(x.bareWithStore.stages.agent), f0(x.bareWithStore.stages.verify), f0(x.bareWithStore.stages.teardown), f0(x.bareWithStore.cpuMsPerRollout), ''],
        [
          String(x.batch),
          'pipeline',
          f0(x.pipeline.stages.queue.p50),
          f0(x.pipeline.stages.provision.p50),
          f0(x.pipeline.stages.agent.p50),
          f0(x.pipeline.stages.verify.p50),
          f0(x.pipeline.stages.teardown.p50),
          `${f0(x.pipeline.cpuMsPerRollout)} (worker ${f0(x.pipeline.cpuMs.worker / x.pipeline.rollouts)}, sandboxes ${f0(x.pipeline.cpuMs.sandboxes / x.pipeline.rollouts)}, server ${f0(x.pipeline.cpuMs.server / x.pipeline.rollouts)}, bench ${f0(x.pipeline.cpuMs.bench / x.pipeline.rollouts)})`,
          `${f0(x.pipeline.cpuUtilization * 100)}% (${f0(x.pipeline.machineBusy * 100)}%)`,
        ],
      ]),
    ),
    '',
    formatBreakdowns(r.rows.map((x) => [String(x.batch), x.pipeline])),
    `one bare rollout at a time: p50 ${f0(r.bareAlone.e2e.p50)} ms, p95 ${f0(r.bareAlone.e2e.p95)} ms, ${f0(r.bareAlone.cpuMsPerRollout)} CPU ms`,
  ];
  if (r.fileDb) {
    const mem = r.rows.at(-1)?.pipeline;
    lines.push(
      `batch ${r.fileDb.rollouts} on a file-backed SQLite dev server: p50 ${f0(r.fileDb.e2e.p50)} ms, ${f2(r.fileDb.rolloutsPerSecond)} rollouts/s` +
        (mem ? ` (in-memory: p50 ${f0(mem.e2e.p50)} ms, ${f2(mem.rolloutsPerSecond)} rollouts/s; file/memory throughput ${f2(r.fileDb.rolloutsPerSecond / mem.rolloutsPerSecond)} x)` : '') +
        `, server CPU ${f0(r.fileDb.cpuMs.server / r.fileDb.rollouts)} ms/rollout`,
    );
  }
  return lines.join('\n');
}
