/**
 * A PostgreSQL server from Debian's `postgresql` package (scripts/setup.sh installs it): initdb
 * into a directory of ours, listening on one address and port, with password authentication
 * (SCRAM-SHA-256) for every connection, local or TCP: a superuser password made at initdb and kept
 * beside the data (`superuser.password`, readable by this host's root only). Trust authentication
 * would make anyone who reaches the address a superuser (and `COPY ... TO PROGRAM` runs commands). Runs as the `postgres` user when we
 * are root (PostgreSQL refuses to run as root). It can be stopped (fast shutdown) or killed
 * outright and started again on the same data, which the cluster's chaos cases do.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { watchChildExit, type ChildExit } from '../servers/childProcessExit.js';
import { pidsWhere } from '../shared/hostProcesses.js';

export class PostgresStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PostgresStartError';
  }
}

export function postgresBinDir(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env.ROLLOUT_PG_BIN;
  if (fromEnv && existsSync(join(fromEnv, 'initdb'))) return fromEnv;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a)) : [];
  if (!versions[0]) {
    throw new PostgresStartError(
      "no PostgreSQL server binaries (initdb) under /usr/lib/postgresql: install Debian's postgresql package (bash scripts/setup.sh test does), or set ROLLOUT_PG_BIN to the directory holding initdb and postgres",
    );
  }
  return join(root, versions[0], 'bin');
}

export interface PostgresOptions {
  /** Holds the data directory and the socket; created (and chowned to postgres) if missing. */
  dir: string;
  host: string;
  port: number;
  maxConnections?: number;
}

/** The postgres superuser's URL of a server, with its password. */
export function postgresUrl(host: string, port: number, database = 'postgres', password = ''): string {
  return `postgres://postgres${password ? `:${encodeURIComponent(password)}` : ''}@${host}:${port}/${database}`;
}

/** A URL with its password replaced by ***, for printing. */
export function redactedUrl(url: string): string {
  return url.replace(/^(postgres(?:ql)?:\/\/[^:/@]+):[^@]*@/, '$1:***@');
}

export const PASSWORD_FILE = 'superuser.password';

function runAsPostgres(dir: string): { uid: number; gid: number } | Record<string, never> {
  if (userInfo().uid !== 0) return {};
  const id = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (id.status !== 0) throw new PostgresStartError("running as root but there is no `postgres` user to run PostgreSQL as: install Debian's postgresql package");
  const user = { uid: Number(id.stdout.trim()), gid: Number(gid.stdout.trim()) };
  chownSync(dir, user.uid, user.gid);
  return user;
}

/** One PostgreSQL server on its data directory, started and stopped as often as a test wants. */
export class PostgresServer {
  readonly url: string;
  /** The postgres superuser's password ('' for a data directory made before passwords, which trusts). */
  readonly password: string;
  private readonly bin = postgresBinDir();
  private child: ChildProcess | undefined;
  private exit: ChildExit | undefined;
  private readonly user: { uid: number; gid: number } | Record<string, never>;

  constructor(private readonly options: PostgresOptions) {
    mkdirSync(options.dir, { recursive: true });
    this.user = runAsPostgres(options.dir);
    this.password = this.superuserPassword();
    this.url = postgresUrl(options.host, options.port, 'postgres', this.password);
  }

  /** The password kept beside the data; a new one for a new data directory. */
  private superuserPassword(): string {
    const file = join(this.options.dir, PASSWORD_FILE);
    if (existsSync(file)) return readFileSync(file, 'utf8').trim();
    if (existsSync(join(this.dataDir, 'PG_VERSION'))) return ''; // made with trust authentication, before passwords
    const password = randomBytes(24).toString('base64url');
    writeFileSync(file, `${password}\n`, { mode: 0o600 });
    return password;
  }

  get dataDir(): string {
    return join(this.options.dir, 'data');
  }

  /** The postmaster's pid while it runs. */
  get pid(): number | undefined {
    return this.running ? this.child?.pid : undefined;
  }

  get running(): boolean {
    return this.exit !== undefined && this.exit.description() === undefined;
  }

  /** initdb on first use, then starts the server and waits until it accepts connections. */
  async start(): Promise<void> {
    if (this.running) return;
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8' };
    if (!existsSync(join(this.dataDir, 'PG_VERSION'))) {
      // initdb (as postgres) reads the password from a file of its own for that moment only.
      const pwfile = join(this.options.dir, '.initdb-password');
      writeFileSync(pwfile, `${this.password}\n`, { mode: 0o600 });
      if ('uid' in this.user) chownSync(pwfile, this.user.uid, this.user.gid);
      const init = spawnSync(
        join(this.bin, 'initdb'),
        ['-D', this.dataDir, '--auth=scram-sha-256', `--pwfile=${pwfile}`, '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync'],
        { encoding: 'utf8', cwd: this.options.dir, env, ...this.user },
      );
      rmSync(pwfile, { force: true });
      if (init.status !== 0) {
        const hint = /Permission denied/.test(init.stderr)
          ? ' (PostgreSQL runs as the postgres user, which must be able to enter every directory above it: chmod o+x them, or choose a directory elsewhere)'
          : '';
        throw new PostgresStartError(`initdb of ${this.dataDir} failed${hint}: ${init.stderr.trim()}`);
      }
    }
    const args = [
      '-D',
      this.dataDir,
      '-p',
      String(this.options.port),
      '-k',
      this.options.dir,
      '-c',
      `listen_addresses=${this.options.host}`,
      '-c',
      'fsync=off',
      '-c',
      `max_connections=${this.options.maxConnections ?? 300}`,
    ];
    // setpriv (util-linux) drops to the postgres user and execs the postmaster with a parent-death
    // signal: if whatever started it dies, it goes too (its backends follow the postmaster).
    const asUser = 'uid' in this.user ? ['--reuid', String(this.user.uid), '--regid', String(this.user.gid), '--clear-groups'] : [];
    const child = spawn('setpriv', ['--pdeathsig', 'KILL', ...asUser, '--', join(this.bin, 'postgres'), ...args], { stdio: ['ignore', 'ignore', 'pipe'], cwd: this.options.dir, env });
    let log = '';
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (log = (log + d).slice(-8_000)));
    this.child = child;
    this.exit = watchChildExit(child);
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ended = this.exit.description();
      if (ended) throw new PostgresStartError(`postgres on ${this.options.host}:${this.options.port} exited during start-up (${ended}): ${log.trim()}`);
      if (await this.accepts()) return;
      if (Date.now() > deadline) throw new PostgresStartError(`postgres on ${this.options.host}:${this.options.port} did not accept connections in 30 s: ${log.trim()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Whether a client can connect and run a query now. */
  async accepts(): Promise<boolean> {
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 1_000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** Fast shutdown (SIGINT: open sessions are rolled back), SIGKILL after 20 s. */
  async stop(): Promise<void> {
    if (this.exit) await this.exit.stop('SIGINT', 20_000);
  }

  /**
   * The postmaster SIGKILLed, as a crash would: its backends notice and exit on their own. The
   * next start recovers from the WAL.
   */
  async kill(): Promise<void> {
    if (!this.child || !this.exit || !this.running) return;
    this.child.kill('SIGKILL');
    await this.exit.exited;
    await this.waitForBackendsGone();
  }

  /** Processes whose working directory is this server's data directory (its postmaster and backends). */
  backendPids(): number[] {
    return pidsWhere((pid) => readlinkSync(`/proc/${pid}/cwd`) === this.dataDir);
  }

  private async waitForBackendsGone(): Promise<void> {
    const deadline = Date.now() + 20_000;
    while (this.backendPids().length > 0) {
      if (Date.now() > deadline) throw new PostgresStartError(`postgres backends of ${this.dataDir} still running 20 s after the postmaster was killed: ${this.backendPids().join(', ')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Stops the server and removes its directory. */
  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.options.dir, { recursive: true, force: true });
  }
}
