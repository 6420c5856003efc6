/**
 * The host side of a local sandbox's exec server (sandbox-init.c, the sandbox's pid 1 when the
 * compiled helper is present): one unix-socket connection per command, no process started on the
 * host. The wire format is described at the top of sandbox-init.c.
 *
 * The connection is the command's lifeline: closing it before the exit frame (the worker died, the
 * activity was cancelled) has the init SIGKILL the command's process group.
 */
import { createConnection, type Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import { deferred } from '../deferred.js';

export interface ServerRunRequest {
  argv: readonly string[];
  env: Record<string, string>;
  stdin: Uint8Array | null;
  /** Bytes of each of stdout and stderr sent back; the rest is only counted. */
  maxOutputBytes: number;
}

export interface ServerExit {
  /** The exit code, or null when a signal ended the command. */
  code: number | null;
  signal: NodeJS.Signals | null;
  totalBytes: { stdout: number; stderr: number };
}

export interface ServerCommand {
  /** The command's pid in the sandbox's pid namespace and its start time (for a later kill by key). */
  started: Promise<{ pid: number; startTime: string }>;
  exit: Promise<ServerExit>;
  /** Signals the command's process group (before or after it exited: a timed-out group's stragglers). */
  signalGroup(signal: NodeJS.Signals): void;
  /** Closes the connection; before the exit frame that SIGKILLs the group. */
  close(): void;
}

/** Thrown when the exec server cannot be reached or breaks the protocol; the caller classifies it. */
export class ExecServerError extends Error {
  override readonly name = 'ExecServerError';
}

const SIGNAL_NUMBERS = osConstants.signals as Record<string, number>;

function frame(type: string, payload: Uint8Array): Buffer {
  const header = Buffer.alloc(5);
  header.write(type, 0, 'latin1');
  header.writeUInt32LE(payload.byteLength, 1);
  return Buffer.concat([header, payload]);
}

function runFrame(request: ServerRunRequest): Buffer {
  const strings = [...request.argv, ...Object.entries(request.env).map(([k, v]) => `${k}=${v}`)];
  for (const s of strings) if (s.includes('\0')) throw new ExecServerError(`a command argument or environment entry contains a NUL byte: ${JSON.stringify(s.slice(0, 80))}`);
  const text = Buffer.from(strings.map((s) => `${s}\0`).join(''), 'utf8');
  const stdin = request.stdin ?? new Uint8Array(0);
  const head = Buffer.alloc(20);
  head.writeBigUInt64LE(BigInt(request.maxOutputBytes), 0);
  head.writeUInt32LE(request.argv.length, 8);
  head.writeUInt32LE(strings.length - request.argv.length, 12);
  head.writeUInt32LE(stdin.byteLength, 16);
  return frame('R', Buffer.concat([head, text, stdin]));
}

/** Splits the init's byte stream into frames. */
class FrameReader {
  private buffered: Buffer = Buffer.alloc(0);

  constructor(private readonly onFrame: (type: string, payload: Buffer) => void) {}

  push(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    while (this.buffered.length >= 5) {
      const length = this.buffered.readUInt32LE(1);
      if (this.buffered.length < 5 + length) return;
      const type = String.fromCharCode(this.buffered[0] as number);
      const payload = this.buffered.subarray(5, 5 + length);
      this.buffered = this.buffered.subarray(5 + length);
      this.onFrame(type, payload);
    }
  }
}

function connect(socketPath: string, onFrame: (type: string, payload: Buffer) => void, onEnd: (err: Error | null) => void): Socket {
  const socket = createConnection(socketPath);
  const reader = new FrameReader(onFrame);
  let ended = false;
  const end = (err: Error | null): void => {
    if (ended) return;
    ended = true;
    onEnd(err);
  };
  socket.on('data', (chunk: Buffer) => reader.push(chunk));
  socket.on('error', (err) => end(new ExecServerError(`exec server ${socketPath}: ${err.message}`)));
  socket.on('close', () => end(null));
  return socket;
}

/** Runs one command through the exec server at `socketPath`; output chunks go to `onOutput` as they come. */
export function runThroughExecServer(socketPath: string, request: ServerRunRequest, onOutput: (stream: 'stdout' | 'stderr', chunk: Buffer) => void): ServerCommand {
  const started = deferred<{ pid: number; startTime: string }>();
  const exit = deferred<ServerExit>();
  let exited = false;
  let connected = false;
  const socket = connect(
    socketPath,
    (type, payload) => {
      switch (type) {
        case 'S':
          started.resolve({ pid: payload.readUInt32LE(0), startTime: payload.subarray(4).toString('latin1') });
          break;
        case 'O':
          onOutput('stdout', Buffer.from(payload));
          break;
        case 'E':
          onOutput('stderr', Buffer.from(payload));
          break;
        case 'X': {
          exited = true;
          const code = payload.readInt32LE(0);
          const signalNumber = payload.readInt32LE(4);
          const signal = signalNumber > 0 ? ((Object.keys(SIGNAL_NUMBERS).find((name) => SIGNAL_NUMBERS[name] === signalNumber) ?? null) as NodeJS.Signals | null) : null;
          const totalBytes = { stdout: Number(payload.readBigUInt64LE(8)), stderr: Number(payload.readBigUInt64LE(16)) };
          // A command that never ran (the init could not fork) still ends with 'X', without 'S'.
          started.resolve({ pid: 0, startTime: '' });
          exit.resolve({ code: code >= 0 ? code : null, signal: code >= 0 ? null : signal, totalBytes });
          break;
        }
        default:
          socket.destroy(new ExecServerError(`exec server ${socketPath}: unknown frame ${JSON.stringify(type)}`));
      }
    },
    (err) => {
      if (exited) return;
      // Closed before 'X': the session was killed (the verifier's stopProcesses, teardown) with its command.
      if (err === null && connected) {
        started.resolve({ pid: 0, startTime: '' });
        exit.resolve({ code: null, signal: 'SIGKILL', totalBytes: { stdout: 0, stderr: 0 } });
        return;
      }
      const failure = err ?? new ExecServerError(`exec server ${socketPath}: closed the connection before answering`);
      started.reject(failure);
      exit.reject(failure);
    },
  );
  socket.once('connect', () => {
    connected = true;
  });
  try {
    socket.write(runFrame(request));
  } catch (err) {
    socket.destroy(err instanceof Error ? err : new Error(String(err)));
  }
  return {
    started: started.promise,
    exit: exit.promise,
    signalGroup(signal) {
      if (socket.destroyed) return;
      const payload = Buffer.alloc(4);
      payload.writeInt32LE(SIGNAL_NUMBERS[signal] ?? 9);
      socket.write(frame('K', payload));
    },
    close() {
      socket.end();
    },
  };
}

/**
 * SIGKILLs the process group led by `pid` (in the sandbox's pid namespace) if that pid is still the
 * process that started at `startTime`, and resolves once it is gone (the init waits up to 5 s).
 */
export function killThroughExecServer(socketPath: string, pid: number, startTime: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const payload = Buffer.alloc(4);
    payload.writeUInt32LE(pid);
    const socket = connect(
      socketPath,
      (type) => {
        if (type === 'X') {
          socket.end();
          resolve();
        }
      },
      (err) => (err ? reject(err) : resolve()),
    );
    socket.write(frame('Q', Buffer.concat([payload, Buffer.from(startTime, 'latin1')])));
  });
}
