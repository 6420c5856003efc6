/**
 * A throwaway PostgreSQL server from Debian's `postgresql` package (which
 * scripts/setup.sh installs): initdb into a temp dir, listen on a free
 * localhost port, removed on stop. Runs as the `postgres` user when the tests
 * run as root (PostgreSQL refuses to run as root).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { userInfo, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../workers/temporalDevServer.js';

export interface RunningPostgres {
  url: string;
  stop(): Promise<void>;
}

function postgresBinDir(): string {
  const fromEnv = process.env.ROLLOUT_PG_BIN;
  if (fromEnv && existsSync(join(fromEnv, 'initdb'))) return fromEnv;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a)) : [];
  if (!versions[0]) throw new Error('no PostgreSQL server binaries (initdb) under /usr/lib/postgresql; install Debian\'s postgresql package (bash scripts/setup.sh does), or set ROLLOUT_PG_BIN to the directory holding initdb and postgres');
  return join(root, versions[0], 'bin');
}

export async function startPostgres(): Promise<RunningPostgres> {
  const bin = postgresBinDir();
  const dir = mkdtempSync(join(tmpdir(), 'rollout-pg-'));
  // As root, run as the postgres user directly (no su/runuser in between, so signals reach postgres itself).
  let user: { uid: number; gid: number } | Record<string, never> = {};
  if (userInfo().uid === 0) {
    const id = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    if (id.status !== 0) throw new Error('running as root but there is no `postgres` user to run PostgreSQL as; install Debian\'s postgresql package');
    user = { uid: Number(id.stdout.trim()), gid: Number(gid.stdout.trim()) };
    chownSync(dir, user.uid, user.gid);
  }
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8' };
  const data = join(dir, 'data');
  const init = spawnSync(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync'], { encoding: 'utf8', cwd: dir, env, ...user });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  const server: ChildProcess = spawn(join(bin, 'postgres'), ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_connections=200'], {
    stdio: ['ignore', 'ignore', 'pipe'],
    cwd: dir,
    env,
    ...user,
  });
  let log = '';
  server.stderr?.setEncoding('utf8').on('data', (d: string) => (log += d));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (server.exitCode !== null) throw new Error(`postgres exited (${server.exitCode}): ${log}`);
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.end();
      break;
    } catch {
      await client.end().catch(() => undefined);
      if (Date.now() > deadline) throw new Error(`postgres did not accept connections in 30 s: ${log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    url,
    async stop() {
      if (server.exitCode === null) {
        const exited = new Promise((r) => server.once('exit', r));
        server.kill('SIGINT'); // fast shutdown
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
