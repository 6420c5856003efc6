/**
 * Section 3: N rollouts at once (default 1,000 = 100 groups × 10) with a
 * policy that answers after 2 s per turn, on one worker process. Completion
 * against the ideal (every rollout's 5 policy calls back to back, plus one
 * bare rollout's own sandbox work measured in this run), errors and leaks
 * (both must be 0), worker RSS and per-sandbox memory, and what the run was
 * waiting on: worker slots at their limit, task queue backlogs, the SDK's
 * schedule-to-start latencies, the worker's event loop, CPU. Each worker
 * setting under test (--sweep) is a run of its own on a fresh server and a
 * fresh worker process.
 */
import { cpus } from 'node:os';
import type { BenchContext } from './context.js';
import { runBareBatch } from './bareLoop.js';
import { bareEnvironment, formatBreakdowns, slim, summarizeBare, type BareSummary, type PipelineSummary } from './orchestration.js';
import { processLayout } from './benchWorkerProcess.js';
import { runPipelineBatch } from './pipelineRun.js';
import type { WorkerSetup } from './benchWorker.js';
import { DEFAULT_SLOTS } from '../workers/pipelineWorkers.js';
import { formatTable } from './stats.js';
import { SETUPS, type SetupName } from './workerSetups.js';
import { benchPolicy, startBenchPolicyServer, TURNS } from './workload.js';


export interface Ideal {
  /** TURNS policy calls back to back at the server's latency. */
  policyMs: number;
  /** One bare rollout's own work (provision, 5 tool calls, verify, teardown) with a zero-latency policy, alone. */
  bareWorkMs: number;
  totalMs: number;
  /** CPU one bare rollout costs (this process and its sandboxes): N of them need at least N × this / cores of wall time. */
  bareCpuMsPerRollout: number;
}

export async function measureIdeal(ctx: BenchContext, delayMs: number): Promise<Ideal & { bare: BareSummary }> {
  const server = await startBenchPolicyServer(0);
  try {
    const bare = await bareEnvironment(ctx, `ideal-${Date.now().toString(36)}`, benchPolicy(server));
    const alone = summarizeBare(await runBareBatch(bare(false), 8, 1));
    return { policyMs: TURNS * delayMs, bareWorkMs: alone.e2e.p50, totalMs: TURNS * delayMs + alone.e2e.p50, bareCpuMsPerRollout: alone.cpuMsPerRollout, bare: alone };
  } finally {
    await server.close();
  }
}

export interface ConcurrencyRun {
  setup: SetupName;
  settings: WorkerSetup;
  run: PipelineSummary;
  completionOverIdeal: number;
  p50OverIdeal: number;
  p95OverIdeal: number;
  /** Lower bound on completion from CPU alone: the run's own CPU per rollout × N / cores. */
  cpuFloorMs: number;
  /** The same bound from the bare loop's CPU per rollout: what any orchestrator needs for the sandbox work. */
  bareCpuFloorMs: number;
  limits: string[];
}

export interface ConcurrencyResult {
  concurrency: number;
  groupSize: number;
  delayMs: number;
  ideal: Ideal;
  runs: ConcurrencyRun[];
}

/** What held a run back, from its own numbers. */
export function diagnose(r: PipelineSummary, idealMs: number, cores: number): string[] {
  const out: string[] = [];
  const t = r.setup.tuning;
  const pct = (x: number): string => `${(x * 100).toFixed(0)}%`;
  const at = r.atSlotLimit;
  const busy = (x: number | undefined): boolean => (x ?? 0) > 0.2;
  if (busy(at.policyActivities))
    out.push(
      `policy slots: all ${t.maxConcurrentPolicyCalls ?? DEFAULT_SLOTS.policyCalls} busy in ${pct(at.policyActivities ?? 0)} of samples; policy backlog peaked at ${r.backlog.policy.peak} tasks (oldest ${(r.backlog.policy.peakAgeMs / 1000).toFixed(1)} s); requests open at the inference server peaked at ${r.policyPeakInFlight} of ${r.rollouts}`,
    );
  if (busy(at.hostActivities))
    out.push(
      `host (tool/verify/teardown) slots: all ${t.maxConcurrentToolCalls ?? DEFAULT_SLOTS.toolCalls} busy in ${pct(at.hostActivities ?? 0)} of samples; backlog peak ${r.backlog.host.peak}`,
    );
  if (busy(at.provisions))
    out.push(
      `provision slots: all ${t.maxConcurrentProvisions ?? DEFAULT_SLOTS.provisions} busy in ${pct(at.provisions ?? 0)} of samples; backlog peak ${r.backlog.provision.peak}`,
    );
  if (busy(at.workflowActivations))
    out.push(
      `workflow task slots: all ${t.maxConcurrentWorkflowTasks ?? DEFAULT_SLOTS.workflowTasks} busy in ${pct(at.workflowActivations ?? 0)} of samples; backlog peak ${r.backlog.workflow.peak}`,
    );
  if (r.machineBusy - r.cpuUtilization > 0.15) out.push(`other processes: the machine was ${pct(r.machineBusy)} busy, the pipeline and bench ${pct(r.cpuUtilization)} of it; the rest was not ours`);
  if (r.backlog.workflow.peakAgeMs > 1000)
    out.push(
      `workflow task queue: backlog peaked at ${r.backlog.workflow.peak} tasks, the oldest ${(r.backlog.workflow.peakAgeMs / 1000).toFixed(1)} s old (first tasks of new rollouts, served by the non-sticky pollers)`,
    );
  if (r.cpuUtilization > 0.8 || r.machineBusy > 0.9) {
    out.push(
      `CPU: ${pct(r.cpuUtilization)} of ${cores} cores over the whole run (workers ${pct(r.cpuMs.worker / r.cpuMs.total)}, their sandbox commands ${pct(r.cpuMs.sandboxes / r.cpuMs.total)}, dev server ${pct(r.cpuMs.server / r.cpuMs.total)}, bench client + policy server ${pct(r.cpuMs.bench / r.cpuMs.total)} of ${(r.cpuMs.total / 1000).toFixed(0)} CPU s)`,
    );
  }
  for (const w of r.workers) {
    const spawnShare = w.spawn.totalMs / r.wallMs;
    if (w.eventLoopDelayMs.p99 > 100 || spawnShare > 0.1) {
      out.push(
        `event loop of the ${w.roles.join('+')} process (peak RSS ${(w.hwmKb / 1024).toFixed(0)} MiB): p99 delay ${w.eventLoopDelayMs.p99.toFixed(0)} ms (max ${w.eventLoopDelayMs.max.toFixed(0)} ms); ` +
          `spawn() alone blocked it ${pct(spawnShare)} of the run (${w.spawn.calls} calls, mean ${(w.spawn.totalMs / Math.max(1, w.spawn.calls)).toFixed(1)} ms, max ${w.spawn.maxMs.toFixed(0)} ms)`,
      );
    }
  }
  const sts = Object.entries(r.scheduleToStartMs).filter(([, v]) => v > 200);
  if (sts.length > 0) out.push(`tasks waited for a worker (mean schedule-to-start): ${sts.map(([k, v]) => `${k} ${v.toFixed(0)} ms`).join(', ')}`);
  if (!r.finished)
    out.push(
      `cut off at the deadline: ${r.completed} of ${r.rollouts} finished in ${(r.wallMs / 1000).toFixed(0)} s (${r.rolloutsPerSecond.toFixed(2)} rollouts/s); the rest were cancelled and torn down`,
    );
  if (out.length === 0) out.push(`nothing saturated: completion ${(r.wallMs / idealMs).toFixed(2)} x ideal`);
  return out;
}

export async function runConcurrency(
  ctx: BenchContext,
  options: { concurrency: number; groupSize: number; delayMs: number; setups: SetupName[]; db: 'memory' | 'file'; deadlineMs?: number },
): Promise<ConcurrencyResult> {
  const ideal: Ideal = await measureIdeal(ctx, options.delayMs);
  ctx.log(`  ideal: ${TURNS} × ${options.delayMs} ms policy + ${ideal.bareWorkMs.toFixed(0)} ms of a bare rollout's own work = ${ideal.totalMs.toFixed(0)} ms`);
  const server = await startBenchPolicyServer(options.delayMs);
  const cores = cpus().length;
  try {
    const env = { scratch: ctx.scratch, taskDirs: ctx.taskDirs, bundleFile: ctx.bundleFile, ...(ctx.placement ? { placement: ctx.placement } : {}), policy: benchPolicy(server), policyServer: server };
    const groups = Math.ceil(options.concurrency / options.groupSize);
    const runs: ConcurrencyRun[] = [];
    for (const setup of options.setups) {
      const run = slim(
        await runPipelineBatch(
          env,
          {
            label: `concurrency-${options.concurrency}-${setup}`,
            groups,
            groupSize: options.groupSize,
            setup: SETUPS[setup],
            db: options.db,
            ...(options.deadlineMs ? { deadlineMs: options.deadlineMs } : {}),
          },
          ctx.log,
        ),
      );
      const limits = diagnose(run, ideal.totalMs, cores);
      runs.push({
        setup,
        settings: SETUPS[setup],
        run,
        completionOverIdeal: run.projectedWallMs / ideal.totalMs,
        p50OverIdeal: run.e2e.p50 / ideal.totalMs,
        p95OverIdeal: run.e2e.p95 / ideal.totalMs,
        cpuFloorMs: (run.cpuMsPerRollout * run.rollouts) / cores,
        bareCpuFloorMs: (ideal.bareCpuMsPerRollout * run.rollouts) / cores,
        limits,
      });
      ctx.log(
        `  ${setup}: ${run.finished ? 'completion' : `cut off at ${(run.wallMs / 1000).toFixed(0)} s with ${run.completed} done, projected completion`} ${(run.projectedWallMs / 1000).toFixed(1)} s = ${(run.projectedWallMs / ideal.totalMs).toFixed(2)} x ideal, ${run.errors} errors, ${run.leaks} leaks`,
      );
    }
    const { policyMs, bareWorkMs, totalMs, bareCpuMsPerRollout } = ideal;
    return { concurrency: groups * options.groupSize, groupSize: options.groupSize, delayMs: options.delayMs, ideal: { policyMs, bareWorkMs, totalMs, bareCpuMsPerRollout }, runs };
  } finally {
    await server.close();
  }
}

const f0 = (n: number): string => n.toFixed(0);
const f2 = (n: number): string => n.toFixed(2);
const mib = (kb: number): string => (kb / 1024).toFixed(0);

export function formatConcurrency(r: ConcurrencyResult): string {
  const lines = [
    `${r.concurrency} rollouts at once (${r.concurrency / r.groupSize} groups × ${r.groupSize}), ${TURNS} turns, policy latency ${r.delayMs} ms, one worker process`,
    `ideal completion ${f0(r.ideal.totalMs)} ms = ${TURNS} × ${r.delayMs} ms policy + ${f0(r.ideal.bareWorkMs)} ms one bare rollout's own work; a bare rollout costs ${f0(r.ideal.bareCpuMsPerRollout)} CPU ms`,
    formatTable(
      [
        'settings',
        'completion ms',
        '/ ideal',
        'p50 / ideal',
        'p95 / ideal',
        'ok',
        'errors',
        'leaks',
        'CPU floor ms',
        'bare CPU floor ms',
        'CPU used',
        'worker peak RSS MiB',
        'server peak RSS MiB',
      ],
      r.runs.map((x) => [
        x.setup,
        x.run.finished ? f0(x.run.wallMs) : `${x.run.completed}/${x.run.rollouts} in ${f0(x.run.wallMs)}; projected ${f0(x.run.projectedWallMs)}`,
        `${f2(x.completionOverIdeal)} x`,
        `${f2(x.p50OverIdeal)} x`,
        `${f2(x.p95OverIdeal)} x`,
        String(x.run.ok),
        String(x.run.errors),
        String(x.run.leaks),
        f0(x.cpuFloorMs),
        f0(x.bareCpuFloorMs),
        `${f0(x.run.cpuUtilization * 100)}% (machine ${f0(x.run.machineBusy * 100)}%)`,
        mib(x.run.workerPeakRssKb),
        mib(x.run.serverPeakRssKb),
      ]),
    ),
    '',
    formatTable(
      [
        'settings',
        'peak alive',
        'PSS/sandbox KiB',
        '+ bwrap KiB',
        'procs/sandbox',
        'host MemAvailable drop / rollout KiB',
        'worker RSS / rollout KiB',
        'policy open peak',
        'in flight peaks: wft / prov / host / policy',
      ],
      r.runs.map((x) => {
        const m = x.run.sandboxMemory;
        const p = x.run.peaks;
        return [
          x.setup,
          String(x.run.peakSandboxesAlive),
          m ? f0(m.pssKbPerSandbox) : '-',
          m ? f0(m.launcherPssKbPerSandbox) : '-',
          m ? m.processesPerSandbox.toFixed(1) : '-',
          f0(x.run.hostMemoryDropKb / Math.max(1, x.run.peakSandboxesAlive)),
          f0(x.run.workerPeakRssKb / x.run.rollouts),
          String(x.run.policyPeakInFlight),
          `${p.workflowActivations ?? '-'} / ${p.provisions ?? '-'} / ${p.hostActivities ?? '-'} / ${p.policyActivities ?? '-'}`,
        ];
      }),
    ),
  ];
  lines.push('', formatBreakdowns(r.runs.map((x) => [x.setup, x.run])));
  for (const x of r.runs) {
    lines.push('', `${x.setup} (${JSON.stringify(x.settings.tuning)}, processes ${processLayout(x.settings)}, sandbox commands spawned by the ${x.settings.sandboxSpawn ?? 'broker'}): held back by`);
    for (const l of x.limits) lines.push(`  - ${l}`);
    if (x.run.errors > 0) lines.push(`  errors: ${JSON.stringify(x.run.errorTypes)}`);
  }
  return lines.join('\n');
}
