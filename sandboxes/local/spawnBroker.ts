/**
 * Starts sandbox commands and sandbox launchers for the local provider from a
 * small process.
 *
 * spawn() forks the calling process before it execs, and a fork copies the
 * caller's page tables: from a worker holding a workflow cache of 1,000
 * rollouts (2.6 GiB RSS) one spawn blocked the event loop 19 ms on average,
 * and the ~12 spawns of every rollout kept it blocked two thirds of a
 * 1,000-rollout benchmark (docs/benchmarks.md). This module is forked once,
 * while the worker is still small, and does the spawning: from a ~60 MiB
 * process a spawn takes under 1 ms. Output comes back over the IPC channel,
 * at most `maxOutputBytes` per stream (the rest is only counted), and the
 * caller signals the command's process group by pid itself, as before.
 *
 * The same `runChild` runs in the worker when no broker is wanted, so both
 * ways share one implementation. Node built-ins only, and nothing that type
 * stripping cannot erase: the broker runs as `node --experimental-strip-types`,
 * without the TypeScript loader.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';

export interface SpawnRequest {
  id: number;
  file: string;
  args: string[];
  env: Record<string, string>;
  /** Written to the command's stdin, which is then closed. */
  stdin: Uint8Array | null;
  /** Bytes of each of stdout and stderr sent back; the rest is only counted. */
  maxOutputBytes: number;
}

/**
 * A sandbox launcher: stdout and stderr appended to `logFile`; fd 3 carries
 * bwrap's info JSON and fd 4 the word "ready" once the sandbox is up. It keeps
 * running for the sandbox's life, so after "ready" nothing more is reported.
 */
export interface LaunchRequest {
  id: number;
  launch: true;
  file: string;
  args: string[];
  env: Record<string, string>;
  logFile: string;
}

export type ChildEvent =
  | { id: number; kind: 'started'; pid: number }
  | { id: number; kind: 'launched'; info: string }
  | { id: number; kind: 'output'; stream: 'stdout' | 'stderr'; chunk: Uint8Array }
  | { id: number; kind: 'exit'; code: number | null; signal: string | null; totalBytes: { stdout: number; stderr: number } }
  | { id: number; kind: 'error'; message: string };

/**
 * After the command exits, reads its pipes to the end. A background process it
 * started may hold them open forever, so reading stops once they have been
 * idle for OUTPUT_IDLE_MS, checked only after the event loop has polled the
 * pipes (setImmediate), so output already written is never dropped however
 * busy the process is. The pipes are not closed then: what a background
 * process still writes to them is read and dropped until its last writer
 * closes them, so it keeps running instead of dying of SIGPIPE (as the exec
 * server does, helper/sandbox-init.c).
 */
const OUTPUT_IDLE_MS = 100;
const OUTPUT_DRAIN_CAP_MS = 5_000;

async function drainAfterExit(streams: Readable[]): Promise<void> {
  let lastData = Date.now();
  const onData = (): void => {
    lastData = Date.now();
  };
  for (const s of streams) s.on('data', onData);
  const closed = Promise.all(streams.map((s) => new Promise((r) => (s.readableEnded || s.destroyed ? r(null) : s.once('close', r)))));
  let isClosed = false;
  void closed.then(() => (isClosed = true));
  const started = Date.now();
  while (!isClosed && Date.now() - started < OUTPUT_DRAIN_CAP_MS) {
    await Promise.race([closed, new Promise((r) => setTimeout(r, 25))]);
    await new Promise((r) => setImmediate(r));
    if (!isClosed && Date.now() - lastData >= OUTPUT_IDLE_MS) break;
  }
  for (const s of streams) {
    // Nothing more reaches the command's result; the stream flows on into nothing until its end.
    s.removeAllListeners('data');
    s.on('data', () => undefined);
    s.on('error', () => undefined);
    // A background process may hold the pipe until teardown: it must not keep this process alive.
    if (s instanceof Socket) s.unref();
  }
}

/** Runs `start` and reports started with the pid, or error (now, or when spawn() reports it later); null on error. */
function startChild<T extends ChildProcess>(id: number, emit: (event: ChildEvent) => void, start: () => T): T | null {
  let child: T;
  try {
    child = start();
  } catch (err) {
    emit({ id, kind: 'error', message: err instanceof Error ? err.message : String(err) });
    return null;
  }
  if (child.pid === undefined) {
    // spawn() reports a missing program or a failed exec asynchronously.
    child.once('error', (err) => emit({ id, kind: 'error', message: err.message }));
    return null;
  }
  emit({ id, kind: 'started', pid: child.pid });
  return child;
}

/**
 * Spawns the command in a session of its own (so its whole process group can
 * be signalled) and reports, in order: started (or error), output chunks, exit.
 */
export function runChild(request: SpawnRequest, emit: (event: ChildEvent) => void): void {
  const { id } = request;
  const child = startChild(id, emit, () => spawn(request.file, request.args, { stdio: ['pipe', 'pipe', 'pipe'], detached: true, env: request.env }));
  if (!child) return;
  const totals = { stdout: 0, stderr: 0 };
  for (const stream of ['stdout', 'stderr'] as const) {
    child[stream].on('data', (chunk: Buffer) => {
      const room = request.maxOutputBytes - totals[stream];
      totals[stream] += chunk.length;
      if (room > 0) emit({ id, kind: 'output', stream, chunk: chunk.length <= room ? chunk : chunk.subarray(0, room) });
    });
  }
  child.stdin.on('error', () => undefined); // the command may exit without reading its stdin
  child.stdin.end(request.stdin ?? '');
  child.once('exit', (code, signal) => {
    void drainAfterExit([child.stdout, child.stderr]).then(() => emit({ id, kind: 'exit', code, signal, totalBytes: totals }));
  });
}

/**
 * Starts a launcher and reports: started (or error), then launched with the
 * info text once fd 4 said "ready", or exit if it died before that.
 */
export function runLauncher(request: LaunchRequest, emit: (event: ChildEvent) => void): void {
  const { id } = request;
  const child = startChild(id, emit, () => {
    const logFd = openSync(request.logFile, 'a');
    try {
      return spawn(request.file, request.args, { detached: true, stdio: ['ignore', logFd, logFd, 'pipe', 'pipe'], env: request.env });
    } finally {
      closeSync(logFd);
    }
  });
  if (!child) return;
  // Extra stdio entries are duplex pipes; the launcher only writes to them.
  const info = child.stdio[3] as Readable;
  const ready = child.stdio[4] as Readable;
  let infoText = '';
  let readyText = '';
  info.setEncoding('utf8');
  info.on('data', (d: string) => (infoText += d));
  ready.setEncoding('utf8');
  const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
    info.destroy();
    ready.destroy();
    emit({ id, kind: 'exit', code, signal, totalBytes: { stdout: 0, stderr: 0 } });
  };
  child.once('exit', onExit);
  ready.on('data', (d: string) => {
    readyText += d;
    if (!readyText.includes('ready')) return;
    child.off('exit', onExit);
    // bwrap writes the info JSON before it starts the command, so it is complete by now.
    info.destroy();
    ready.destroy();
    child.unref();
    emit({ id, kind: 'launched', info: infoText });
  });
}

// The broker process: spawn requests in, child events out, until the worker that forked it goes away.
if (process.send !== undefined && process.argv[1] === fileURLToPath(import.meta.url)) {
  const send = (event: ChildEvent): void => {
    if (process.connected) process.send?.(event);
  };
  process.on('message', (request: SpawnRequest | LaunchRequest) => ('launch' in request ? runLauncher(request, send) : runChild(request, send)));
  // The commands it started live on (they are the sandboxes' business); only the broker goes.
  process.on('disconnect', () => process.exit(0));
  // A terminal's Ctrl-C reaches the whole foreground process group: the worker decides what stops
  // (rollout run --embedded cancels its rollouts first), and the broker goes when the worker does.
  process.on('SIGINT', () => undefined);
}
