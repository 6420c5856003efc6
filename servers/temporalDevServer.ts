/**
 * Starts and stops `temporal server start-dev`: the embedded default for the
 * demo and the server every integration test runs against.
 *
 * The project's search attributes are registered at start (--search-attribute),
 * `dbFilename` makes the server's state survive a restart, and `start` returns
 * only once the frontend answers health checks and the search attributes are
 * visible. `stop` sends SIGTERM, then SIGKILL after a grace period.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import { ROLLOUT_SEARCH_ATTRIBUTES } from '../shared/searchAttributes.js';
import { watchChildExit } from './childProcessExit.js';
import { resolveTemporalBinary, type TemporalBinary } from './temporalBinary.js';

export interface DevServerOptions {
  /** Resolved with resolveTemporalBinary() when absent. */
  binary?: TemporalBinary;
  ip?: string;
  /** Frontend gRPC port; a free one is chosen when absent. */
  port?: number;
  /** Web UI port; a free one is chosen when absent; `false` runs headless. */
  uiPort?: number | false;
  /** SQLite file that keeps the server's state across restarts; in-memory when absent. */
  dbFilename?: string;
  namespace?: string;
  /** Port of the server's Prometheus endpoint (http://<ip>:<port>/metrics); the CLI picks one when absent. */
  metricsPort?: number;
  /** Where the server's own output goes; a file under the OS temp dir when absent. */
  logFile?: string;
  startTimeoutMs?: number;
  /**
   * Start the server in a process group of its own, so a terminal's Ctrl-C (sent to the whole
   * foreground group) reaches only its owner, which can still cancel work through it before
   * stopping it (rollout run --embedded).
   */
  ownProcessGroup?: boolean;
}

export interface RunningDevServer {
  address: string;
  namespace: string;
  uiUrl: string | undefined;
  pid: number;
  logFile: string;
  binary: TemporalBinary;
  stop(): Promise<void>;
  /** SIGKILLs the server at once (synchronous: for a process about to exit). */
  kill(): void;
}

export class DevServerStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DevServerStartError';
  }
}

/** Asks the kernel for a free TCP port on `ip`. */
export async function freePort(ip = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, ip, () => {
      const addr = server.address();
      server.close(() => {
        if (addr && typeof addr === 'object') resolve(addr.port);
        else reject(new Error('could not determine a free port'));
      });
    });
  });
}

export function searchAttributeFlags(): string[] {
  return ROLLOUT_SEARCH_ATTRIBUTES.flatMap((key) => ['--search-attribute', `${key.name}=${key.type}`]);
}

function logTail(logFile: string, lines = 20): string {
  try {
    return readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Resolves once the frontend is healthy and our search attributes are registered. */
async function waitUntilReady(address: string, namespace: string, deadline: number, exited: () => string | undefined): Promise<void> {
  const wanted = ROLLOUT_SEARCH_ATTRIBUTES.map((k) => k.name);
  let lastError = 'not contacted yet';
  while (Date.now() < deadline) {
    const exit = exited();
    if (exit) throw new DevServerStartError(`temporal server exited during start-up (${exit})`);
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        await connection.healthService.check({});
        const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
        const missing = wanted.filter((name) => !(name in (customAttributes ?? {})));
        if (missing.length === 0) return;
        lastError = `search attributes not registered yet: ${missing.join(', ')}`;
      } finally {
        await connection.close();
      }
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new DevServerStartError(`temporal server at ${address} was not ready in time: ${lastError}`);
}

export async function startDevServer(options: DevServerOptions = {}): Promise<RunningDevServer> {
  const binary = options.binary ?? (await resolveTemporalBinary());
  const ip = options.ip ?? '127.0.0.1';
  const namespace = options.namespace ?? 'default';
  const port = options.port ?? (await freePort(ip));
  const uiPort = options.uiPort === false ? undefined : (options.uiPort ?? (await freePort(ip)));
  const logFile = options.logFile ?? join(tmpdir(), `temporal-dev-server-${port}.log`);

  const args = ['server', 'start-dev', '--ip', ip, '--port', String(port), '--log-level', 'warn'];
  // One partition per task queue: with the default four, a task written to a partition nobody is polling
  // waits for a poll to land there (up to the 60 s long-poll), which one worker process per queue makes
  // likely; seen as a recordRollout activity that took 61 s to start in the demo.
  for (const key of ['matching.numTaskqueueReadPartitions', 'matching.numTaskqueueWritePartitions']) args.push('--dynamic-config-value', `${key}=1`);
  // Eager activity dispatch: an activity a workflow task schedules on the workflow's own queue (provision,
  // recordRollout) comes back in the answer to that task's completion instead of through matching and a poll
  // (the worker reserves a slot for it: maxEagerActivityReservationsPerWorkflowTask, default 3).
  args.push('--dynamic-config-value', 'system.enableActivityEagerExecution=true');
  // `default` always exists; --namespace creates additional ones.
  if (namespace !== 'default') args.push('--namespace', namespace);
  args.push(...searchAttributeFlags());
  if (uiPort === undefined) args.push('--headless');
  else args.push('--ui-port', String(uiPort));
  if (options.dbFilename) args.push('--db-filename', options.dbFilename);
  if (options.metricsPort !== undefined) args.push('--metrics-port', String(options.metricsPort));

  const logFd = openSync(logFile, 'a');
  const child = spawn(binary.path, args, { stdio: ['ignore', logFd, logFd], detached: options.ownProcessGroup ?? false });
  closeSync(logFd);

  const exit = watchChildExit(child);

  const address = `${ip}:${port}`;
  const stop = async (): Promise<void> => {
    await exit.stop('SIGTERM', 10_000);
  };

  try {
    await waitUntilReady(address, namespace, Date.now() + (options.startTimeoutMs ?? 60_000), () => exit.description());
  } catch (err) {
    await stop();
    const message = err instanceof Error ? err.message : String(err);
    throw new DevServerStartError(`${message}\n--- last lines of ${logFile} ---\n${logTail(logFile)}`);
  }

  if (child.pid === undefined) throw new DevServerStartError('temporal server did not start (no pid)');
  return {
    address,
    namespace,
    uiUrl: uiPort === undefined ? undefined : `http://${ip}:${uiPort}`,
    pid: child.pid,
    logFile,
    binary,
    stop,
    kill: () => {
      if (exit.description() === undefined) child.kill('SIGKILL');
    },
  };
}
