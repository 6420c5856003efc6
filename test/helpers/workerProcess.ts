/**
 * `rollout worker` as a separate OS process, the way an operator runs it: its
 * own task queues (--queue-prefix), sandbox host id, data directory, sandbox
 * registry and Prometheus endpoint, its pino lines collected from stdout. The
 * fault suite SIGKILLs it; the telemetry test scrapes it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { testServerAddress } from './temporal.js';

const ROLLOUT_BIN = resolve(fileURLToPath(new URL('../../client/bin/rollout.js', import.meta.url)));

export interface WorkerProcessOptions {
  queuePrefix: string;
  /** --host-id; without it the worker uses its hostname. */
  hostId?: string;
  dataDir: string;
  /** Shared by every worker process of one simulated host (the registry of its sandboxes). */
  sandboxRoot: string;
  metricsPort?: number;
  address?: string;
  /** --store setting (fs by default). */
  store?: string;
  env?: Record<string, string>;
  /** A command prefix the worker runs under, e.g. nsenter into a test-made network namespace. */
  wrap?: string[];
  /** More `rollout worker` arguments (e.g. --build-id B --stop-grace 30). */
  args?: string[];
}

export interface WorkerProcess {
  child: ChildProcess;
  /** Parsed pino lines written so far. */
  lines: Record<string, unknown>[];
  stderr: () => string;
  /** Resolves when the worker logged that it is running. */
  ready: Promise<void>;
  /** Resolves with the exit code or signal. */
  exited: Promise<string>;
  kill(signal: NodeJS.Signals): void;
}

export function startWorkerProcess(options: WorkerProcessOptions): WorkerProcess {
  mkdirSync(options.dataDir, { recursive: true });
  mkdirSync(options.sandboxRoot, { recursive: true });
  const args = [ROLLOUT_BIN, 'worker', '--address', options.address ?? testServerAddress(), '--queue-prefix', options.queuePrefix, '--data-dir', options.dataDir];
  if (options.hostId !== undefined) args.push('--host-id', options.hostId);
  if (options.metricsPort !== undefined) args.push('--metrics', `127.0.0.1:${options.metricsPort}`);
  if (options.store !== undefined) args.push('--store', options.store);
  args.push(...(options.args ?? []));
  const wrap = options.wrap ?? [];
  const child = spawn(wrap[0] ?? process.execPath, wrap.length > 0 ? [...wrap.slice(1), process.execPath, ...args] : args, {
    env: { ...process.env, LOG_LEVEL: 'debug', ROLLOUT_SANDBOX_ROOT: options.sandboxRoot, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  let stderr = '';
  let partial = '';
  let markReady: () => void = () => {};
  let failReady: (err: Error) => void = () => {};
  const ready = new Promise<void>((res, rej) => {
    markReady = res;
    failReady = rej;
  });
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    partial += chunk;
    const complete = partial.split('\n');
    partial = complete.pop() ?? '';
    for (const text of complete) {
      if (!text.trim()) continue;
      try {
        const line = JSON.parse(text) as Record<string, unknown>;
        lines.push(line);
        if (line.msg === 'pipeline workers running') markReady();
      } catch {
        lines.push({ msg: text, unparsed: true });
      }
    }
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<string>((res) => {
    child.once('exit', (code, signal) => {
      const how = signal ?? `exit ${code}`;
      failReady(new Error(`rollout worker exited (${how}) before it was ready:\n${stderr}`));
      res(how);
    });
  });
  return { child, lines, stderr: () => stderr, ready, exited, kill: (signal) => void child.kill(signal) };
}

export function dataDirs(root: string, name: string): { dataDir: string; sandboxRoot: string } {
  return { dataDir: join(root, name, 'data'), sandboxRoot: join(root, name, 'sandboxes') };
}
