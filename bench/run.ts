/**
 * `npm run bench [-- --json] [-- --sections 1,2,3,4,cluster] [size flags]`
 *   --cycles N --alive N       section 1 (default 200, 200)
 *   --batches 8,32,128         section 2 batch sizes in rollouts (--group-size 8)
 *   --concurrency 1000         section 3 rollouts at once (groups of --curve-group-size 10)
 *   --curve 10,100,1000        section 4 concurrencies
 *   --delay-ms 2000            policy latency of sections 3 and 4
 *   --setup defaults           worker setup of sections 2-4 (bench/workerSetups.ts SETUPS)
 *   --policy-calls queue|local where sections 2-4 run each turn's policy call (group.policyCalls; default queue)
 *   --attempt-on workflow|host where sections 2-4 and cluster run each attempt's agent loop (group.attemptOn; default workflow)
 *   --resume replay|restart    how their attempts resume after an infra failure (failurePolicy.resume; default restart; replay:
 *                              every tool call then records the digest of the sandbox's files)
 *   --sweep before,split       more setups to compare in section 3
 *   --deadline-min 6           a section 3/4 run still open after this is cut off and projected
 *   --db memory|file           the dev server's SQLite
 *   --json-file F              also write the JSON object to F (with the tables on stdout)
 *   --task-files 1,2000,10000  section 5 sizes of environment/ in files (10 KiB each)
 *   --model-tasks write-greeting,fix-median --model-group-size 2 --model-max-turns 4 --model-max-tokens 256
 *                              section 6 (needs ROLLOUT_MODEL_GGUF from scripts/ensure-model.sh, else skipped)
 *   --cluster-configs dev,1,2,3 --cluster-groups 6 --cluster-group-size 4 --cluster-delay-ms 2000
 *   --cluster-shards 8 --cluster-history 2 --cluster-netns on|off --cluster-idle-s 12 --cluster-settle-s 11
 *                              section `cluster` (not in the default list; needs the real server,
 *                              scripts/ensure-temporal-server.sh, and root for cgroups and namespaces)
 *
 * How fast the pipeline is and how its cost grows, as ratios and percentiles
 * against baselines measured in the same run; never a timed assertion.
 *   1. sandbox lifecycle against fork/exec and bare bubblewrap floors
 *   2. orchestration overhead: 5-turn rollouts with a zero-latency policy,
 *      through the real Temporal dev server, against the same work in a bare
 *      in-process loop; per-rollout p50/p95 and throughput per batch size
 *   3. concurrency: N rollouts at once with a policy that answers after 2 s,
 *      on one worker: completion against the ideal, errors, leaks, memory,
 *      where it saturates (optionally a sweep of worker settings)
 *   4. scaling curve: cost per rollout as concurrency grows
 *   5. task version check per activity call, by task size: loadTask against
 *      the activities' task cache
 *   6. a real model (llama.cpp + Qwen2.5-Coder-0.5B) on the sample tasks: wall
 *      time per turn split into model time and the pipeline's own time, and the
 *      fraction of a rollout's wall time that is not the model's
 *   cluster. the same batch on the dev server (one worker host) and on the
 *      production topology (PostgreSQL + every Temporal service its own process)
 *      with 1, 2, 3 worker hosts: rollouts/s, p50/p95, CPU per rollout by
 *      component (cgroup cpuacct), database writes, state transitions and tasks
 *      per rollout (bench/clusterBench.ts; the capacity model: docs/scaling.md)
 * Every section records the machine and the load average at its start and end.
 */
import type { Placement } from './context.js';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { bundlePipelineWorkflows } from '../workers/pipelineWorkers.js';
import { installRuntime, createLogger } from '../workers/logger.js';
import { runSandboxLifecycle, formatSandboxLifecycle } from './sandboxLifecycle.js';
import { runOrchestration, formatOrchestration } from './orchestration.js';
import { runConcurrency, formatConcurrency } from './concurrency.js';
import { SETUPS, type SetupName } from './workerSetups.js';
import { runScaling, formatScaling } from './scaling.js';
import { runTaskLoading, formatTaskLoading } from './taskLoading.js';
import { runRealModel, formatRealModel } from './realModel.js';
import { parseClusterConfigs, runClusterBench } from './clusterBench.js';
import { formatClusterBench } from './clusterBenchTable.js';
import { loadAverages } from './procStats.js';
import { machineFacts } from './stats.js';
import { createBenchTasks } from './workload.js';

const { values } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    'json-file': { type: 'string' },
    sections: { type: 'string', default: '1,2,3,4,5,6' },
    cycles: { type: 'string', default: '200' },
    alive: { type: 'string', default: '200' },
    batches: { type: 'string', default: '8,32,128' },
    'group-size': { type: 'string', default: '8' },
    concurrency: { type: 'string', default: '1000' },
    curve: { type: 'string', default: '10,100,1000' },
    'curve-group-size': { type: 'string', default: '10' },
    'delay-ms': { type: 'string', default: '2000' },
    setup: { type: 'string', default: 'defaults' },
    sweep: { type: 'string', default: '' },
    db: { type: 'string', default: 'memory' },
    'deadline-min': { type: 'string', default: '6' },
    'task-files': { type: 'string', default: '1,2000,10000' },
    'model-tasks': { type: 'string', default: 'write-greeting,fix-median' },
    'model-group-size': { type: 'string', default: '2' },
    'model-max-turns': { type: 'string', default: '4' },
    'model-max-tokens': { type: 'string', default: '256' },
    'policy-calls': { type: 'string' },
    'attempt-on': { type: 'string' },
    resume: { type: 'string' },
    'cluster-configs': { type: 'string', default: 'dev,1,2,3' },
    'cluster-groups': { type: 'string', default: '6' },
    'cluster-group-size': { type: 'string', default: '4' },
    'cluster-delay-ms': { type: 'string', default: '2000' },
    'cluster-shards': { type: 'string', default: '8' },
    'cluster-history': { type: 'string', default: '2' },
    'cluster-netns': { type: 'string', default: 'on' },
    'cluster-idle-s': { type: 'string', default: '12' },
    'cluster-settle-s': { type: 'string', default: '11' },
  },
  strict: true,
});

const policyCallsFlag = values['policy-calls'];
if (policyCallsFlag !== undefined && policyCallsFlag !== 'queue' && policyCallsFlag !== 'local') {
  console.error(`--policy-calls ${JSON.stringify(policyCallsFlag)}: use queue or local`);
  process.exit(2);
}
const attemptOnFlag = values['attempt-on'];
if (attemptOnFlag !== undefined && attemptOnFlag !== 'workflow' && attemptOnFlag !== 'host') {
  console.error(`--attempt-on ${JSON.stringify(attemptOnFlag)}: use workflow or host`);
  process.exit(2);
}
const resumeFlag = values.resume;
if (resumeFlag !== undefined && resumeFlag !== 'replay' && resumeFlag !== 'restart') {
  console.error(`--resume ${JSON.stringify(resumeFlag)}: use replay or restart`);
  process.exit(2);
}
const placement: Placement = {
  ...(policyCallsFlag ? { policyCalls: policyCallsFlag } : {}),
  ...(attemptOnFlag ? { attemptOn: attemptOnFlag } : {}),
  ...(resumeFlag ? { failurePolicy: { resume: resumeFlag } } : {}),
};
const list = (s: string): number[] => s.split(',').filter(Boolean).map(Number);
type SectionId = number | 'cluster';
const SECTION_IDS: SectionId[] = [1, 2, 3, 4, 5, 6, 'cluster'];
const sections = new Set(
  values.sections
    .split(',')
    .filter(Boolean)
    .map((s): SectionId => {
      const id = s === 'cluster' ? s : Number(s);
      if (!SECTION_IDS.includes(id)) throw new Error(`--sections: unknown section ${JSON.stringify(s)}; known: ${SECTION_IDS.join(', ')}`);
      return id;
    }),
);
if (values['cluster-netns'] !== 'on' && values['cluster-netns'] !== 'off') throw new Error('--cluster-netns is on or off');
const clusterConfigs = parseClusterConfigs(values['cluster-configs']);
const log = values.json ? (): void => undefined : (line: string): void => console.log(line);
const setupNames = (s: string): SetupName[] =>
  s
    .split(',')
    .filter(Boolean)
    .map((n) => {
      if (!(n in SETUPS)) throw new Error(`unknown worker setup ${n}; known: ${Object.keys(SETUPS).join(', ')}`);
      return n as SetupName;
    });
if (values.db !== 'memory' && values.db !== 'file') throw new Error('--db is memory or file');

// The bench process is a Temporal client only; keep the SDK's own log lines quiet.
installRuntime(createLogger('bench'));
const scratch = mkdtempSync(join(tmpdir(), 'rollout-bench-'));
// BENCH_KEEP_SCRATCH=1 keeps it (worker logs, trajectories) to look into a run afterwards.
const removeScratch = (): void => {
  if (process.env.BENCH_KEEP_SCRATCH === '1') process.stderr.write(`bench scratch kept: ${scratch}\n`);
  else rmSync(scratch, { recursive: true, force: true });
};
// Also when a section's cleanup ends the process on Ctrl-C (bench/cleanupStack.ts), past the finally below.
process.on('exit', removeScratch);
const out: Record<string, unknown> = { machine: await machineFacts(), commandLine: process.argv.slice(2).join(' ') };
log(`rollout-pipeline benchmarks · ${JSON.stringify(out.machine)}`);

async function section<T>(n: SectionId, name: string, run: () => Promise<T>, format: (r: T) => string): Promise<void> {
  if (!sections.has(n)) return;
  const loadStart = loadAverages();
  log('');
  log(`== ${typeof n === 'number' ? `${n}.` : `${n}:`} ${name} (load average at start ${loadStart.join(' ')}) ==`);
  const startedAt = new Date().toISOString();
  const result = await run();
  const loadEnd = loadAverages();
  out[typeof n === 'number' ? `section${n}` : n] = { name, startedAt, loadAverageStart: loadStart, loadAverageEnd: loadEnd, ...result };
  log(format(result));
  log(`(load average at end ${loadEnd.join(' ')})`);
}

try {
  const maxGroups = Math.max(
    1,
    Number(values['cluster-groups']),
    ...list(values.batches).map((b) => Math.ceil(b / Number(values['group-size']))),
    Math.ceil(Number(values.concurrency) / Number(values['curve-group-size'])),
    ...list(values.curve).map((c) => Math.ceil(c / Number(values['curve-group-size']))),
  );
  const taskDirs = createBenchTasks(join(scratch, 'tasks'), maxGroups);
  let bundleFile = '';
  const bundle = async (): Promise<string> => {
    if (!bundleFile) {
      bundleFile = join(scratch, 'workflow-bundle.json');
      writeFileSync(bundleFile, JSON.stringify(await bundlePipelineWorkflows()));
    }
    return bundleFile;
  };
  const ctx = async () => ({ scratch, taskDirs, bundleFile: await bundle(), log, ...(Object.keys(placement).length > 0 ? { placement } : {}) });
  mkdirSync(join(scratch, 'bare'), { recursive: true });

  await section(1, 'sandbox lifecycle (local provider)', () => runSandboxLifecycle({ cycles: Number(values.cycles), alive: Number(values.alive), log }), formatSandboxLifecycle);
  await section(
    2,
    'orchestration overhead (zero-latency policy)',
    async () =>
      runOrchestration(await ctx(), {
        batches: list(values.batches),
        groupSize: Number(values['group-size']),
        setup: setupNames(values.setup)[0] ?? 'defaults',
        db: values.db as 'memory' | 'file',
      }),
    formatOrchestration,
  );
  await section(
    3,
    `concurrency (${values.concurrency} rollouts at once, policy latency ${values['delay-ms']} ms)`,
    async () =>
      runConcurrency(await ctx(), {
        concurrency: Number(values.concurrency),
        groupSize: Number(values['curve-group-size']),
        delayMs: Number(values['delay-ms']),
        setups: [...new Set([...setupNames(values.sweep), ...setupNames(values.setup)])],
        db: values.db as 'memory' | 'file',
        deadlineMs: Number(values['deadline-min']) * 60_000,
      }),
    formatConcurrency,
  );
  await section(
    4,
    `scaling curve (policy latency ${values['delay-ms']} ms)`,
    async () =>
      runScaling(await ctx(), {
        concurrencies: list(values.curve),
        groupSize: Number(values['curve-group-size']),
        delayMs: Number(values['delay-ms']),
        setup: setupNames(values.setup)[0] ?? 'defaults',
        db: values.db as 'memory' | 'file',
        reuse: out.section3 as Parameters<typeof runScaling>[1]['reuse'],
        deadlineMs: Number(values['deadline-min']) * 60_000,
      }),
    formatScaling,
  );
  await section(
    5,
    'task version check per activity call',
    () => runTaskLoading({ scratch, sizes: list(values['task-files']).map((files) => ({ files, bytesPerFile: 10 * 1024 })), calls: 30 }),
    formatTaskLoading,
  );
  await section(
    6,
    'a real model: where a rollout spends its time (llama.cpp, Qwen2.5-Coder-0.5B, one thread)',
    async () => {
      const groupSize = Number(values['model-group-size']);
      return runRealModel(await ctx(), {
        tasks: values['model-tasks'].split(',').filter(Boolean),
        groupSize,
        maxTurns: Number(values['model-max-turns']),
        maxTokens: Number(values['model-max-tokens']),
        parallel: groupSize,
      });
    },
    formatRealModel,
  );
  await section(
    'cluster',
    `the production topology: dev server against the real cluster with 1-3 worker hosts (policy latency ${values['cluster-delay-ms']} ms)`,
    () =>
      runClusterBench(
        { scratch, taskDirs, log, ...(Object.keys(placement).length > 0 ? { placement } : {}) },
        {
          configs: clusterConfigs,
          groups: Number(values['cluster-groups']),
          groupSize: Number(values['cluster-group-size']),
          delayMs: Number(values['cluster-delay-ms']),
          shards: Number(values['cluster-shards']),
          historyProcesses: Number(values['cluster-history']),
          netns: values['cluster-netns'] === 'on',
          idleMs: Number(values['cluster-idle-s']) * 1000,
          settleMs: Number(values['cluster-settle-s']) * 1000,
          db: values.db as 'memory' | 'file',
        },
      ),
    formatClusterBench,
  );
  out.finishedAt = new Date().toISOString();
  out.loadAverageEnd = loadAverages();
  if (values.json) console.log(JSON.stringify(out, null, 2));
  if (values['json-file']) writeFileSync(values['json-file'], `${JSON.stringify(out, null, 2)}\n`);
  log(`\nfinished ${String(out.finishedAt)}, load average ${loadAverages().join(' ')}`);
} finally {
  removeScratch();
}
