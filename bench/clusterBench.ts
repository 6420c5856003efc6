/**
 * Section `cluster` of `npm run bench`: the same batch (the bench workload: groups of 5-turn
 * rollouts, real bash tool calls in real local sandboxes, a scripted policy that answers after
 * --cluster-delay-ms) on the embedded dev server with one worker host, and on the production
 * topology (cluster/: PostgreSQL, frontend, history × 2, matching, worker service, each its own
 * process) with 1, 2 and 3 worker hosts. What each configuration costs per rollout, split by
 * component from cgroup cpuacct accounting (bench/cgroupCpu.ts), and what it asks of the database
 * and the history shards (bench/pgCounters.ts, bench/serverMetrics.ts): the inputs of the capacity
 * model in docs/scaling.md. Everything it starts is undone by a CleanupStack, on Ctrl-C too.
 */
import { chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { LocalTemporalCluster } from '../cluster/localCluster.js';
import { resolveTemporalServer } from '../cluster/temporalServerBinary.js';
import { freePort, startDevServer } from '../servers/temporalDevServer.js';
import { CgroupCpu } from './cgroupCpu.js';
import { CleanupStack } from './cleanupStack.js';
import { keepWal } from './pgCounters.js';
import type { Placement } from './context.js';
import { BENCH_GROUP, HOSTS_GROUP, runConfig, type ConfigEnv, type ConfigResult, type ConfigSpec, type ServerUnderTest } from './clusterConfigRun.js';
import { benchPolicy, startBenchPolicyServer, TURNS } from './workload.js';

export type ClusterConfigName = 'dev' | number;

export interface ClusterBenchOptions {
  /** `dev` (the dev server, one host) and host counts on the cluster, in order. */
  configs: ClusterConfigName[];
  groups: number;
  groupSize: number;
  delayMs: number;
  shards: number;
  historyProcesses: number;
  netns: boolean;
  /** Split in three windows; the idle rate is the median of theirs. */
  idleMs: number;
  settleMs: number;
  db: 'memory' | 'file';
}

export interface ClusterBenchResult {
  options: ClusterBenchOptions;
  turns: number;
  devServer: string | null;
  clusterServer: string | null;
  configs: ConfigResult[];
}

export function parseClusterConfigs(s: string): ClusterConfigName[] {
  return s
    .split(',')
    .filter(Boolean)
    .map((c) => {
      if (c === 'dev') return 'dev';
      const n = Number(c);
      if (!Number.isInteger(n) || n < 1 || n > 26) throw new Error(`--cluster-configs: ${JSON.stringify(c)} is neither \`dev\` nor a number of worker hosts (1-26)`);
      return n;
    });
}

/** The cgroups of the cluster's processes: PostgreSQL, then the Temporal services by their names in LocalTemporalCluster. */
const clusterComponents = (historyProcesses: number): string[] => ['postgres', 'frontend', ...Array.from({ length: historyProcesses }, (_, i) => `history-${i + 1}`), 'matching', 'worker'];

export async function runClusterBench(ctx: { scratch: string; taskDirs: string[]; log: (line: string) => void; placement?: Placement }, options: ClusterBenchOptions): Promise<ClusterBenchResult> {
  const cleanup = new CleanupStack();
  const dir = join(ctx.scratch, 'cluster-bench');
  mkdirSync(dir, { recursive: true });
  chmodSync(ctx.scratch, 0o755); // PostgreSQL runs as the postgres user and must reach its directory
  chmodSync(dir, 0o755);
  const configs: ConfigResult[] = [];
  let devServer: string | null = null;
  let clusterServer: string | null = null;
  try {
    const needsCluster = options.configs.some((c) => c !== 'dev');
    // Before anything starts: a missing server binary is one line with the fix.
    const binaries = needsCluster ? resolveTemporalServer() : undefined;
    const cgroups = CgroupCpu.create();
    cleanup.push('cgroups', () => cgroups.destroy());
    // Everything this process starts from now on is charged to `bench` until moved to its own group.
    cgroups.add(BENCH_GROUP, process.pid, { tree: true });
    cgroups.group(HOSTS_GROUP);
    const policyServer = await startBenchPolicyServer(options.delayMs);
    cleanup.push('policy server', () => policyServer.close());
    const warmServer = await startBenchPolicyServer(0);
    cleanup.push('warm-up policy server', () => warmServer.close());
    const env: ConfigEnv = {
      scratch: dir,
      taskDirs: ctx.taskDirs,
      cgroups,
      cleanup,
      policy: benchPolicy(policyServer),
      warmPolicy: benchPolicy(warmServer),
      ...(ctx.placement ? { placement: ctx.placement } : {}),
      policyEndpoints: [policyServer, warmServer].map((s) => ({ host: '127.0.0.1', port: Number(new URL(s.baseUrl).port) })),
      log: ctx.log,
    };
    const spec = (label: string, hosts: number): ConfigSpec => ({
      label,
      hosts,
      netns: options.netns,
      groups: options.groups,
      groupSize: options.groupSize,
      idleMs: options.idleMs,
      settleMs: options.settleMs,
    });

    if (options.configs.includes('dev')) {
      const metricsPort = await freePort();
      const server = await startDevServer({ uiPort: false, metricsPort, logFile: join(dir, 'dev-server.log'), ...(options.db === 'file' ? { dbFilename: join(dir, 'dev-server.sqlite') } : {}) });
      const stopServer = cleanup.push('dev server', () => server.stop());
      devServer = server.binary.version;
      cgroups.add('dev server', server.pid, { tree: true });
      ctx.log(`  dev server ${server.address} (${server.binary.version}, SQLite ${options.db === 'file' ? 'file' : 'in memory'})`);
      const target: ServerUnderTest = {
        kind: 'dev server',
        address: server.address,
        namespace: server.namespace,
        metricsUrls: [`http://127.0.0.1:${metricsPort}/metrics`],
        components: ['dev server'],
      };
      configs.push(await runConfig(env, target, spec('dev server, 1 host', 1)));
      await stopServer();
    }

    if (needsCluster && binaries) {
      const clusterDir = join(dir, 'cluster');
      mkdirSync(clusterDir, { recursive: true });
      chmodSync(clusterDir, 0o755);
      // A random 127.82.x.* so a run beside the chaos suite (127.78.x) or `rollout cluster up` (127.77.0) takes no address of theirs.
      const cluster = await LocalTemporalCluster.start({
        dir: clusterDir,
        historyShards: options.shards,
        historyProcesses: options.historyProcesses,
        loopbackPrefix: `127.82.${1 + Math.floor(Math.random() * 250)}`,
        binaries,
      });
      const stopCluster = cleanup.push('cluster', () => cluster.destroy());
      clusterServer = cluster.serverVersion;
      await keepWal(cluster.postgres.url);
      const components = clusterComponents(options.historyProcesses);
      cgroups.add('postgres', cluster.postgres.pid as number, { tree: true });
      for (const name of components.slice(1)) cgroups.add(name, cluster.service(name).pid as number);
      const state = cluster.state();
      ctx.log(`  cluster ${cluster.frontendAddress} (server ${cluster.serverVersion}, ${options.shards} shards, ${options.historyProcesses} history processes, PostgreSQL)`);
      const target: ServerUnderTest = {
        kind: 'cluster',
        address: cluster.frontendAddress,
        namespace: cluster.namespace,
        metricsUrls: state.services.map((s) => s.metrics),
        pgUrl: cluster.postgres.url,
        pgDataDir: cluster.postgres.dataDir,
        components,
        clientEnv: cluster.clientEnv,
      };
      for (const hosts of options.configs.filter((c): c is number => c !== 'dev')) {
        configs.push(await runConfig(env, target, spec(`cluster, ${hosts} host${hosts > 1 ? 's' : ''}`, hosts)));
      }
      await stopCluster();
    }
    return { options, turns: TURNS, devServer, clusterServer, configs };
  } finally {
    await cleanup.run();
  }
}
