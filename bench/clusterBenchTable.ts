/** The cluster section's table: one column per configuration, one row per measure. */
import type { ClusterBenchResult } from './clusterBench.js';
import { BENCH_GROUP, type ConfigResult } from './clusterConfigRun.js';
import { formatTable } from './stats.js';

const COMPONENT_NAMES: Record<string, string> = {
  postgres: 'PostgreSQL',
  worker: 'Temporal worker service',
  'dev server': 'dev server (all services, SQLite)',
};

const SERVER_SIDE = (c: ConfigResult): string[] => c.components.map((n) => `cpu:${n}`);

function num(n: number | undefined | null, digits = 1): string {
  return n === undefined || n === null || !Number.isFinite(n) ? '-' : n.toFixed(digits);
}

export function formatClusterBench(r: ClusterBenchResult): string {
  const o = r.options;
  const cs = r.configs;
  const components = [...new Set(cs.flatMap((c) => c.components))];
  const per = (key: string, digits = 1) => (c: ConfigResult): string => (key in c.perRollout ? num(c.perRollout[key], digits) : '-');
  const sum = (c: ConfigResult, keys: string[], from: Record<string, number>): number => keys.reduce((a, k) => a + (from[k] ?? 0), 0);
  const rows: [string, (c: ConfigResult) => string][] = [
    ['worker hosts', (c) => `${c.hosts} (${c.hostKind})`],
    ['rollouts ok / errors / leaks', (c) => `${c.ok} / ${c.errors} / ${c.leaks}`],
    ['batch wall s', (c) => num(c.wallMs / 1000)],
    ['rollouts/s', (c) => num(c.rolloutsPerSecond, 2)],
    ['rollout p50 s', (c) => num(c.e2e.p50 / 1000, 2)],
    ['rollout p95 s', (c) => num(c.e2e.p95 / 1000, 2)],
    ['CPU ms per rollout (idle subtracted):', () => ''],
    ...components.map((n): [string, (c: ConfigResult) => string] => [`  ${COMPONENT_NAMES[n] ?? n}`, per(`cpu:${n}`, 0)]),
    ['  = Temporal + its database', (c) => num(sum(c, SERVER_SIDE(c), c.perRollout), 0)],
    ['  rollout workers (node processes)', per('cpu:rollout workers', 0)],
    ['  sandboxes (+ broker, bwrap)', per('cpu:sandboxes', 0)],
    ['  bench: client, policy, relays', per(`cpu:${BENCH_GROUP}`, 0)],
    ['  = total', (c) => num(sum(c, Object.keys(c.perRollout).filter((k) => k.startsWith('cpu:')), c.perRollout), 0)],
    ['  total, idle not subtracted', (c) => num(sum(c, Object.keys(c.perRolloutGross).filter((k) => k.startsWith('cpu:')), c.perRolloutGross), 0)],
    ['server-side idle CPU ms/s', (c) => num(sum(c, SERVER_SIDE(c), c.idlePerSecond), 0)],
    ['DB write transactions / rollout', per('db:writeTransactions')],
    ['DB transactions incl. reads / rollout', per('db:commits')],
    ['DB rows written / rollout', per('db:tupleWrites')],
    ['WAL KiB / rollout', (c) => ('db:walBytes' in c.perRollout ? num((c.perRollout['db:walBytes'] ?? 0) / 1024) : '-')],
    ['visibility commits / rollout', per('db:visibilityCommits')],
    ['DB write transactions/s idle', (c) => ('db:writeTransactions' in c.idlePerSecond ? num(c.idlePerSecond['db:writeTransactions']) : '-')],
    ['state transitions / rollout', per('server:stateTransitions')],
    ['shard writes / rollout', per('server:shardWrites')],
    ['UpdateWorkflowExecution mean ms', (c) => num(c.updateLatencyMs, 2)],
    ['workflow tasks / rollout', per('server:workflowTasks')],
    ['activity tasks / rollout', per('server:activityTasks')],
    ['activity heartbeats / rollout', per('server:heartbeats')],
    ['load average start → end', (c) => `${c.loadAverageStart[0]} → ${c.loadAverageEnd[0]}`],
  ];
  const header = [
    `${o.groups} groups × ${o.groupSize} rollouts, ${r.turns} turns, policy ${o.delayMs} ms/turn; cluster: ${o.shards} shards, ${o.historyProcesses} history processes; window = batch + ${o.settleMs / 1000} s, idle rate: median of three windows in the ${o.idleMs / 1000} s before it`,
    `servers: dev ${r.devServer ?? '-'}; cluster ${r.clusterServer ?? '-'}`,
  ];
  return [...header, formatTable(['', ...cs.map((c) => c.label)], rows.map(([name, f]) => [name, ...cs.map(f)]))].join('\n');
}
