/**
 * One measured batch through the real pipeline: a fresh Temporal dev server
 * (in-memory SQLite, or a file under the scratch dir), the pipeline workers
 * in processes of their own (bench/benchWorker.ts) with the options under
 * test, a batch submitted with client/submitBatch.ts, and everything the run
 * costs: wall time, per-rollout end to end (the rollout workflow's start to
 * close, from visibility) and stage timings (RolloutResult.timings), where a
 * sample of rollouts spent their time (histories), errors, leaks (sandbox
 * registry entries, processes, mounts, cgroups left), CPU of the workers,
 * their sandboxes, the server and this process, peak RSS, sandbox memory at
 * the most sandboxes alive, task queue backlogs and the SDK's
 * schedule-to-start latencies.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { SandboxRegistry } from '../sandboxes/local/sandboxRegistry.js';
import { LocalSandboxProvider } from '../sandboxes/local/localSandboxProvider.js';
import { submitBatch } from '../client/submitBatch.js';
import type { GroupResult, RolloutResult } from '../shared/pipeline.js';
import { hostTaskQueue } from '../shared/names.js';
import { summarize, type Summary } from '../shared/stats.js';
import { countLeaks, leaksUnder } from '../test/faults/faultKit.js';
import { freePort, startDevServer } from '../servers/temporalDevServer.js';
import { WORKER_ROLES } from '../workers/pipelineWorkers.js';
import type { BenchWorkerConfig, BenchWorkerReport } from './benchWorker.js';
import { historyBreakdown } from './historyBreakdown.js';
import { request, startWorker } from './benchWorkerProcess.js';
import type { PipelineRunSpec, PipelineEnv, SandboxMemorySample, WorkerProcessReport, PipelineRunResult } from './pipelineRunResult.js';
import { busyShare, cpuDelta, machineCpu, memAvailableKb, processCpu, processMemoryKb, processTreeCpu, sandboxProcessMemory, type CpuTimes } from './procStats.js';

/** Means of the SDK's schedule-to-start histograms, by task kind (workflow tasks, each activity queue). */
function scheduleToStart(metricsTexts: string[], queues: { main: string; policy: string; host: string }): Record<string, number> {
  const sums = new Map<string, { sum: number; count: number }>();
  let seconds = false;
  for (const line of metricsTexts.join('\n').split('\n')) {
    const m = /^temporal_(workflow_task|activity)_schedule_to_start_latency(_seconds)?_(sum|count)\{([^}]*)\}\s+([\d.eE+-]+)/.exec(line);
    if (!m) continue;
    const [, kind, unit, part, labels, value] = m;
    if (unit) seconds = true;
    const queue = /task_queue="([^"]*)"/.exec(labels ?? '')?.[1] ?? '';
    const name =
      kind === 'workflow_task'
        ? queue === queues.main
          ? 'workflow task'
          : 'workflow task (sticky)'
        : queue === queues.policy
          ? 'policy activity'
          : queue === queues.host
            ? 'host activity'
            : 'provision activity';
    const entry = sums.get(name) ?? { sum: 0, count: 0 };
    if (part === 'sum') entry.sum += Number(value);
    else entry.count += Number(value);
    sums.set(name, entry);
  }
  return Object.fromEntries([...sums].map(([k, v]) => [k, v.count > 0 ? (v.sum / v.count) * (seconds ? 1000 : 1) : 0]));
}

/** PSS of up to `max` live sandboxes of the registry, spread over it. */
function sampleSandboxMemory(registry: SandboxRegistry, max: number): SandboxMemorySample | null {
  const ids = registry.ids();
  const step = Math.max(1, Math.floor(ids.length / max));
  const pids = ids
    .filter((_, i) => i % step === 0)
    .slice(0, max)
    .flatMap((id) => {
      const pid = registry.read(id)?.handle?.pid;
      return pid ? [pid] : [];
    });
  const m = sandboxProcessMemory(pids);
  if (m.sandboxes === 0) return null;
  return { alive: ids.length, sampled: m.sandboxes, processesPerSandbox: m.processes / m.sandboxes, pssKbPerSandbox: m.pssKb / m.sandboxes, launcherPssKbPerSandbox: m.launcherPssKb / m.sandboxes };
}

export async function runPipelineBatch(env: PipelineEnv, spec: PipelineRunSpec, log: (line: string) => void = () => undefined): Promise<PipelineRunResult> {
  const runDir = join(env.scratch, `run-${spec.label.replace(/[^A-Za-z0-9_-]/g, '_')}-${Date.now().toString(36)}`);
  const sandboxRoot = join(runDir, 'sandboxes');
  mkdirSync(sandboxRoot, { recursive: true });
  const registry = new SandboxRegistry(sandboxRoot);
  const server = await startDevServer({ uiPort: false, logFile: join(runDir, 'temporal.log'), ...(spec.db === 'file' ? { dbFilename: join(runDir, 'temporal.sqlite') } : {}) });
  const connection = await Connection.connect({ address: server.address });
  const client = new Client({ connection });
  const queues = { main: `bench-${Date.now().toString(36)}`, policy: `bench-${Date.now().toString(36)}-policy` };
  const hostId = `${queues.main}-host`;
  const processes = spec.setup.processes ?? [[...WORKER_ROLES]];
  const children: ChildProcess[] = [];
  const metricsPorts: number[] = [];
  let sampler: NodeJS.Timeout | undefined;
  try {
    for (const [i, roles] of processes.entries()) {
      const metricsPort = await freePort();
      metricsPorts.push(metricsPort);
      const config: BenchWorkerConfig = {
        address: server.address,
        taskQueues: queues,
        hostId,
        sandboxRoot,
        dataDir: join(runDir, 'data'),
        bundleFile: env.bundleFile,
        metricsPort,
        roles,
        tuning: spec.setup.tuning,
        ...(spec.setup.sandboxSpawn ? { sandboxSpawn: spec.setup.sandboxSpawn } : {}),
      };
      children.push(await startWorker(config, join(runDir, `worker-${i}.log`)));
    }
    const pids = children.map((c) => c.pid as number);
    const rollouts = spec.groups * spec.groupSize;
    const batchId = `bench-${spec.label.replace(/[^A-Za-z0-9_-]/g, '_')}-${Date.now().toString(36)}`;
    if (spec.warmup) {
      const warm = await submitBatch(client, { batchId: `${batchId}-warmup`, tasks: env.taskDirs.slice(0, 1), groupSize: 1, minValid: 1, policy: env.policy, taskQueues: queues, ...env.placement });
      for await (const group of warm.results()) if (group.status !== 'complete') throw new Error(`warm-up group ${group.status}: ${group.statusReason}`);
    }

    // Every second: host memory, sandboxes alive (and their memory at each new high), task queue backlogs.
    const memStart = memAvailableKb();
    let memLow = memStart;
    let peakAlive = 0;
    let sandboxMemory: SandboxMemorySample | null = null;
    const backlog: PipelineRunResult['backlog'] = { workflow: { peak: 0, peakAgeMs: 0 }, provision: { peak: 0, peakAgeMs: 0 }, host: { peak: 0, peakAgeMs: 0 }, policy: { peak: 0, peakAgeMs: 0 } };
    // temporal.api.enums.v1.TaskQueueType: 1 workflow, 2 activity.
    const watched: [keyof typeof backlog, string, 1 | 2][] = [
      ['workflow', queues.main, 1],
      ['provision', queues.main, 2],
      ['host', hostTaskQueue(hostId), 2],
      ['policy', queues.policy, 2],
    ];
    let sampling = false;
    sampler = setInterval(() => {
      memLow = Math.min(memLow, memAvailableKb());
      const alive = registry.ids().length;
      peakAlive = Math.max(peakAlive, alive);
      if (alive > 0 && alive > (sandboxMemory?.alive ?? 0) * 1.1) sandboxMemory = sampleSandboxMemory(registry, 50) ?? sandboxMemory;
      if (sampling) return;
      sampling = true;
      void Promise.all(
        watched.map(async ([key, name, type]) => {
          const r = await connection.workflowService.describeTaskQueue({ namespace: 'default', taskQueue: { name }, taskQueueType: type, reportStats: true });
          const age = r.stats?.approximateBacklogAge;
          backlog[key].peak = Math.max(backlog[key].peak, Number(r.stats?.approximateBacklogCount ?? 0));
          backlog[key].peakAgeMs = Math.max(backlog[key].peakAgeMs, age ? Number(age.seconds ?? 0) * 1000 + (age.nanos ?? 0) / 1e6 : 0);
        }),
      )
        .catch(() => undefined)
        .finally(() => (sampling = false));
    }, 1000);

    const cpu0 = { workers: pids.map((p) => processTreeCpu(p)), server: processCpu(server.pid), bench: processCpu('self'), machine: machineCpu() };
    log(`  ${spec.label}: ${spec.groups} groups × ${spec.groupSize} = ${rollouts} rollouts, db ${spec.db}, workers ${JSON.stringify(spec.setup)}`);
    env.policyServer?.resetStats();
    const started = Date.now();
    const batch = await submitBatch(client, {
      batchId,
      tasks: env.taskDirs.slice(0, spec.groups),
      groupSize: spec.groupSize,
      minValid: 1,
      policy: env.policy,
      taskQueues: queues,
      ...env.placement,
      // The benchmark counts errors; it must not hide them behind retries.
      failurePolicy: { ...env.placement?.failurePolicy, infra: { retries: 0, backoffSec: 1, onExhausted: 'mask' } },
    });
    const groups: GroupResult[] = [];
    const collected = (async () => {
      for await (const g of batch.results()) groups.push(g);
    })();
    let finished = true;
    if (spec.deadlineMs) {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<'deadline'>((resolve) => (timer = setTimeout(() => resolve('deadline'), spec.deadlineMs)));
      finished = (await Promise.race([collected.then(() => 'done' as const), deadline])) === 'done';
      clearTimeout(timer);
    } else {
      await collected;
    }
    const wallMs = Date.now() - started;
    const cpu1 = { workers: pids.map((p) => processTreeCpu(p)), server: processCpu(server.pid), bench: processCpu('self'), machine: machineCpu() };
    clearInterval(sampler);
    sampler = undefined;

    const reports = await Promise.all(children.map((c) => request(c, 'report')));
    const inBatch = `WorkflowType = "rollout" AND RolloutBatch = "${batchId}"`;
    let completedByDeadline = rollouts;
    let failedByDeadline = 0;
    if (!finished) {
      completedByDeadline = (await client.workflow.count(`${inBatch} AND ExecutionStatus = "Completed"`)).count;
      failedByDeadline = (await client.workflow.count(`${inBatch} AND ExecutionStatus = "Completed" AND (RolloutOutcomeClass != "ok" OR RolloutReward != 1)`)).count;
      log(`  deadline: ${completedByDeadline} of ${rollouts} rollouts finished; cancelling the rest (their sandboxes are torn down)`);
      collected.catch(() => undefined);
      await Promise.all(batch.groups.map((g) => g.handle.cancel().catch(() => undefined)));
      await Promise.allSettled(batch.groups.map((g) => g.handle.result()));
    }
    const metricsTexts = await Promise.all(metricsPorts.map((port) => fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text(), () => '')));
    const workerPeaks = pids.map((p, i) => processMemoryKb(p).hwmKb || (reports[i]?.hwmKb ?? 0));
    const serverPeak = processMemoryKb(server.pid).hwmKb;

    // Per-rollout end to end from visibility (eventually consistent: wait until every rollout is listed closed).
    const e2e: number[] = [];
    const rolloutIds: string[] = [];
    for (let tries = 0; tries < 60; tries++) {
      e2e.length = 0;
      rolloutIds.length = 0;
      for await (const w of client.workflow.list({ query: `${inBatch} AND ExecutionStatus = "Completed"` })) {
        if (!w.closeTime || w.closeTime.getTime() > started + wallMs) continue;
        e2e.push(w.closeTime.getTime() - w.startTime.getTime());
        rolloutIds.push(w.workflowId);
      }
      if (e2e.length >= completedByDeadline) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const step = Math.max(1, Math.floor(rolloutIds.length / 16));
    const breakdown = await historyBreakdown(client, rolloutIds.filter((_, i) => i % step === 0).slice(0, 16));

    await Promise.all(children.map((c) => request(c, 'stop').catch(() => undefined)));
    await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.once('exit', r)))));
    const leakDetail = leaksUnder(sandboxRoot, reports.flatMap((r) => r.sandboxIds));

    const all: RolloutResult[] = finished ? groups.flatMap((g) => g.rollouts) : [];
    const notOk = all.filter((r) => r.outcomeClass !== 'ok' || r.reward !== 1);
    const errorTypes: Record<string, number> = {};
    for (const r of notOk) {
      const key = `${r.outcomeClass}/${r.outcomeType}${r.reward === 0 ? ' (reward 0)' : ''}`;
      errorTypes[key] = (errorTypes[key] ?? 0) + 1;
    }
    if (!finished && failedByDeadline > 0) errorTypes['not ok (by search attributes)'] = failedByDeadline;
    const completed = finished ? rollouts : completedByDeadline;
    const workerCpu: CpuTimes[] = pids.map((_, i) => cpuDelta(cpu1.workers[i] as CpuTimes, cpu0.workers[i] as CpuTimes));
    const serverCpu = cpuDelta(cpu1.server, cpu0.server);
    const cpuMs = {
      worker: workerCpu.reduce((a, c) => a + c.selfMs, 0),
      sandboxes: workerCpu.reduce((a, c) => a + c.childrenMs, 0),
      server: serverCpu.selfMs + serverCpu.childrenMs,
      bench: cpuDelta(cpu1.bench, cpu0.bench).selfMs,
      total: 0,
    };
    cpuMs.total = cpuMs.worker + cpuMs.sandboxes + cpuMs.server + cpuMs.bench;
    const stage = (f: (r: RolloutResult) => number): Summary => summarize(all.map(f));
    const workers: WorkerProcessReport[] = reports.map(({ type: _t, sandboxIds: _ids, ...r }, i) => ({
      ...r,
      hwmKb: workerPeaks[i] ?? r.hwmKb,
      cpuMs: workerCpu[i]?.selfMs ?? 0,
      sandboxCpuMs: workerCpu[i]?.childrenMs ?? 0,
    }));
    const merge = (pick: (r: BenchWorkerReport) => Partial<Record<string, number>>): Partial<Record<string, number>> =>
      Object.assign({}, ...reports.map(pick)) as Partial<Record<string, number>>;
    return {
      label: spec.label,
      db: spec.db,
      setup: spec.setup,
      groups: spec.groups,
      groupSize: spec.groupSize,
      rollouts,
      finished,
      completed,
      projectedWallMs: finished ? wallMs : completed > 0 ? (wallMs * rollouts) / completed : Number.NaN,
      wallMs,
      rolloutsPerSecond: completed / (wallMs / 1000),
      e2e: summarize(e2e),
      stages: {
        queue: stage((r) => r.timings.queueMs),
        provision: stage((r) => r.timings.provisionMs),
        agent: stage((r) => r.timings.agentMs),
        verify: stage((r) => r.timings.verifyMs),
        teardown: stage((r) => r.timings.teardownMs),
      },
      ok: finished ? all.length - notOk.length : completed - failedByDeadline,
      errors: finished ? notOk.length + (rollouts - all.length) : failedByDeadline,
      errorTypes,
      leaks: countLeaks(leakDetail),
      leakDetail,
      cpuMs,
      // A cut-off run also did part of the work of the rollouts still open: this overstates the cost per finished one.
      cpuMsPerRollout: cpuMs.total / Math.max(1, completed),
      cpuUtilization: cpuMs.total / (wallMs * cpus().length),
      machineBusy: busyShare(cpu1.machine, cpu0.machine),
      workerPeakRssKb: workerPeaks.reduce((a, b) => a + b, 0),
      serverPeakRssKb: serverPeak,
      hostMemoryDropKb: memStart - memLow,
      peakSandboxesAlive: peakAlive,
      sandboxMemory,
      workers,
      peaks: merge((r) => r.peaks),
      atSlotLimit: merge((r) => r.atSlotLimit),
      eventLoopP99Ms: Math.max(...reports.map((r) => r.eventLoopDelayMs.p99)),
      backlog,
      scheduleToStartMs: scheduleToStart(metricsTexts, { ...queues, host: hostTaskQueue(hostId) }),
      policyPeakInFlight: env.policyServer?.stats().peakInFlight ?? 0,
      breakdown,
    };
  } finally {
    if (sampler) clearInterval(sampler);
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
    }
    await connection.close();
    await server.stop();
    // Whatever a failed run left behind goes, so the next run starts clean; leaks were counted above.
    if (readdirSync(sandboxRoot).some((n) => !n.startsWith('.'))) {
      const provider = new LocalSandboxProvider({ stateRoot: sandboxRoot });
      for (const record of await provider.list()) await provider.teardown(record.id).catch(() => undefined);
    }
  }
}
