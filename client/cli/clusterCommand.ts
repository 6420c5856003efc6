/**
 * `rollout cluster up|status|down`: the production topology of Temporal on this machine
 * (cluster/localCluster.ts) to try workers against: PostgreSQL, and frontend, history, matching and
 * worker as separate processes. `up` runs in the foreground until Ctrl-C or `down`.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import { CLUSTER_STATE_FILE, LocalTemporalCluster, type ClusterState } from '../../cluster/localCluster.js';
import { temporalSettings } from '../../workers/temporalConnection.js';
import { dataDir, positiveInt } from './cliSettings.js';
import { HelpRequested, parseCommandLine, wantsHelp } from './commandLine.js';
import { UsageError } from './usageError.js';

export const clusterUsage = `rollout cluster up [--dir DIR] [--history N] [--shards N] [--loopback-prefix A.B.C] [--port N]
rollout cluster status [--dir DIR]
rollout cluster down [--dir DIR] [--purge]
  The real Temporal server (built by \`bash scripts/setup.sh cluster\`) on PostgreSQL, each service
  its own process on its own loopback address, for workers to run against as in production. The
  services speak mTLS with a CA of the cluster's own (DIR/tls); PostgreSQL asks for a password.
  \`up\` prints the TEMPORAL_TLS_* a client sets, then:
    rollout worker --address <frontend> --host-id host-1 ...   (one per host)
  up      starts PostgreSQL, creates or updates the schemas, starts the services, registers the
          namespace \`default\` and the search attributes; runs until Ctrl-C (or \`down\`)
          --dir DIR             where the database, configs and logs live (default <data-dir>/cluster;
                                a second \`up\` on the same DIR keeps its workflows)
          --history N           history processes (default 2: a shard owner can die)
          --shards N            history shards, fixed when DIR is first created (default 8)
          --loopback-prefix     first three octets of the processes' addresses (default 127.77.0)
          --port N              the frontend's gRPC port (default 7233)
  status  each process: address, pid, whether it answers
  down    stops the \`up\` of DIR; --purge also deletes DIR (the database with it)`;

function clusterDir(flag: string | undefined, dataDirFlag: string | undefined): string {
  return flag ?? join(dataDir(dataDirFlag), 'cluster');
}

function readState(dir: string): ClusterState | undefined {
  const file = join(dir, CLUSTER_STATE_FILE);
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, 'utf8')) as ClusterState;
}

function alive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function up(argv: string[]): Promise<number> {
  const { values } = parseCommandLine(argv, {
    command: 'cluster up',
    usage: clusterUsage,
    options: { dir: { type: 'string' }, 'data-dir': { type: 'string' }, history: { type: 'string' }, shards: { type: 'string' }, 'loopback-prefix': { type: 'string' }, port: { type: 'string' } },
  });
  const prefix = values['loopback-prefix'] ?? '127.77.0';
  if (!/^127\.\d{1,3}\.\d{1,3}$/.test(prefix)) throw new UsageError(`--loopback-prefix ${JSON.stringify(prefix)}: give the first three octets of a loopback address, e.g. 127.77.0`);
  const dir = clusterDir(values.dir, values['data-dir']);
  const running = readState(dir);
  if (running && alive(running.pid))
    throw new UsageError(
      `a cluster already runs from ${dir} (pid ${running.pid}, frontend ${running.frontendAddress}); stop it with \`rollout cluster down --dir ${dir}\``,
    );
  const port = positiveInt('port', values.port, 7233);
  const cluster = await LocalTemporalCluster.start({
    dir,
    historyProcesses: positiveInt('history', values.history, 2),
    historyShards: positiveInt('shards', values.shards, 8),
    loopbackPrefix: prefix,
    frontendPort: port,
  });
  const state = cluster.state();
  process.stdout.write(
    `Temporal server ${cluster.serverVersion} on PostgreSQL (${state.postgres.url}), ${state.historyShards} history shards\n` +
      `  frontend  ${state.frontendAddress}   namespace ${state.namespace}\n` +
      state.services.map((s) => `  ${s.name.padEnd(9)} ${s.address}  pid ${s.pid}  log ${s.log}\n`).join('') +
      `The frontend and the services speak mTLS with the cluster's own CA (${state.clientEnv.TEMPORAL_TLS_SERVER_CA_CERT_PATH ?? ''}); a client needs its certificate:\n` +
      Object.entries(state.clientEnv).map(([k, v]) => `  export ${k}=${v}\n`).join('') +
      `Workers (with those): rollout worker --address ${state.frontendAddress} --host-id <host> ...\n` +
      'Ctrl-C (or `rollout cluster down`) stops it.\n',
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  process.stdout.write('stopping the cluster...\n');
  await cluster.stop();
  return 0;
}

async function answers(address: string, clientEnv: Record<string, string>): Promise<string> {
  try {
    const { tls } = temporalSettings(address, clientEnv);
    const connection = await Connection.connect({ address, connectTimeout: 2_000, ...(tls ? { tls } : {}) });
    try {
      await connection.healthService.check({});
      return 'serving';
    } finally {
      await connection.close();
    }
  } catch (err) {
    return `not answering (${err instanceof Error ? err.message.split('\n')[0] : String(err)})`;
  }
}

async function status(argv: string[]): Promise<number> {
  const { values } = parseCommandLine(argv, { command: 'cluster status', usage: clusterUsage, options: { dir: { type: 'string' }, 'data-dir': { type: 'string' } } });
  const dir = clusterDir(values.dir, values['data-dir']);
  const state = readState(dir);
  if (!state || !alive(state.pid)) {
    process.stdout.write(`no cluster runs from ${dir}${state ? ` (its \`up\`, pid ${state.pid}, is gone)` : ''}; start one with \`rollout cluster up --dir ${dir}\`\n`);
    return 1;
  }
  process.stdout.write(`cluster of ${dir} (up pid ${state.pid}, since ${state.startedAt})\n  frontend ${state.frontendAddress}: ${await answers(state.frontendAddress, state.clientEnv ?? {})}\n`);
  process.stdout.write(`  postgres  ${state.postgres.url}  pid ${state.postgres.pid ?? '-'}  ${alive(state.postgres.pid) ? 'running' : 'NOT RUNNING'}\n`);
  let down = alive(state.postgres.pid) ? 0 : 1;
  for (const s of state.services) {
    const up = alive(s.pid);
    if (!up) down++;
    process.stdout.write(`  ${s.name.padEnd(9)} ${s.address}  pid ${s.pid ?? '-'}  ${up ? 'running' : 'NOT RUNNING'}\n`);
  }
  return down === 0 ? 0 : 1;
}

async function downCommand(argv: string[]): Promise<number> {
  const { values } = parseCommandLine(argv, {
    command: 'cluster down',
    usage: clusterUsage,
    options: { dir: { type: 'string' }, 'data-dir': { type: 'string' }, purge: { type: 'boolean', default: false } },
  });
  const dir = clusterDir(values.dir, values['data-dir']);
  const state = readState(dir);
  if (state && alive(state.pid)) {
    process.kill(state.pid, 'SIGTERM');
    const deadline = Date.now() + 60_000;
    while (alive(state.pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    if (alive(state.pid)) throw new UsageError(`the cluster's \`up\` (pid ${state.pid}) did not stop in 60 s; look at its terminal, or kill it`);
    process.stdout.write(`stopped the cluster of ${dir}\n`);
  } else {
    process.stdout.write(`no cluster runs from ${dir}\n`);
  }
  if (values.purge && existsSync(dir)) {
    rmSync(dir, { recursive: true, force: true });
    process.stdout.write(`deleted ${dir}\n`);
  }
  return 0;
}

export async function clusterCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === 'up') return up(rest);
  if (sub === 'status') return status(rest);
  if (sub === 'down') return downCommand(rest);
  if (wantsHelp(argv)) throw new HelpRequested(clusterUsage);
  throw new UsageError(`unknown cluster subcommand ${JSON.stringify(sub ?? '')}; usage:\n${clusterUsage}`);
}
