/**
 * How the local provider starts a command in a sandbox: through the spawn
 * broker (default; a small process forked on first use, see spawnBroker.ts)
 * or from this process ('worker', what it did before; the benchmark's
 * baseline). Both report the same events from the same runChild.
 *
 * If the broker dies, every command it was running fails as
 * infra/exec_transport (their processes live on in their sessions, and the
 * attempt's teardown removes them with the sandbox); the next command forks
 * a new broker.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ClassifiedError } from '../../shared/failures.js';
import { deferred, type Deferred } from './deferred.js';
import { runChild, runLauncher, type ChildEvent, type LaunchRequest, type SpawnRequest } from './spawnBroker.js';

export type SpawnVia = 'broker' | 'worker';
export const SPAWN_VIA: readonly SpawnVia[] = ['broker', 'worker'];

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
  totalBytes: { stdout: number; stderr: number };
}

export interface SpawnedCommand {
  /** The command's pid (it leads its own process group); rejects when it could not be started. */
  started: Promise<number>;
  exit: Promise<ExitStatus>;
}

export interface SpawnedLauncher {
  /** The launcher's pid; rejects when it could not be started. */
  started: Promise<number>;
  /** bwrap's info JSON once the sandbox said "ready"; rejects with the launcher's exit status if it died first. */
  launched: Promise<string>;
}

export interface SandboxSpawner {
  spawn(request: Omit<SpawnRequest, 'id'>, onOutput: (stream: 'stdout' | 'stderr', chunk: Buffer) => void): SpawnedCommand;
  launch(request: Omit<LaunchRequest, 'id'>): SpawnedLauncher;
}

const BROKER_ENTRY = fileURLToPath(new URL('./spawnBroker.ts', import.meta.url));

function transportError(message: string): ClassifiedError<'infra'> {
  return new ClassifiedError('infra', 'exec_transport', message);
}

/** Thrown (as the launched promise's reason) when a launcher exits before its sandbox is up. */
export class LauncherExited extends Error {
  override readonly name = 'LauncherExited';
  constructor(readonly status: ExitStatus) {
    super(`launcher exited (${status.signal ?? `code ${status.code}`})`);
  }
}

interface Pending {
  onOutput: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  started: Deferred<number>;
  exit: Deferred<ExitStatus>;
  launched: Deferred<string> | null;
}

/** Routes events of runChild / runLauncher (here or in the broker) to the request they belong to. */
class EventRouter {
  private nextId = 1;
  readonly pending = new Map<number, Pending>();

  constructor(private readonly onIdle: () => void = () => undefined) {}

  open(onOutput: Pending['onOutput'], launcher: boolean): { id: number; entry: Pending } {
    const id = this.nextId++;
    const entry: Pending = { onOutput, started: deferred(), exit: deferred(), launched: launcher ? deferred() : null };
    this.pending.set(id, entry);
    return { id, entry };
  }

  private close(id: number): void {
    this.pending.delete(id);
    if (this.pending.size === 0) this.onIdle();
  }

  deliver(event: ChildEvent): void {
    const entry = this.pending.get(event.id);
    if (!entry) return;
    switch (event.kind) {
      case 'started':
        entry.started.resolve(event.pid);
        break;
      case 'launched':
        // The launcher lives as long as its sandbox; nothing more is awaited from it.
        this.close(event.id);
        entry.launched?.resolve(event.info);
        break;
      case 'output':
        entry.onOutput(event.stream, Buffer.isBuffer(event.chunk) ? event.chunk : Buffer.from(event.chunk.buffer, event.chunk.byteOffset, event.chunk.byteLength));
        break;
      case 'exit': {
        this.close(event.id);
        const status: ExitStatus = { code: event.code, signal: event.signal as NodeJS.Signals | null, totalBytes: event.totalBytes };
        entry.exit.resolve(status);
        entry.launched?.reject(new LauncherExited(status));
        break;
      }
      case 'error': {
        this.close(event.id);
        const err = transportError(`cannot start ${event.message}`);
        entry.started.reject(err);
        entry.exit.reject(err);
        entry.launched?.reject(err);
        break;
      }
    }
  }

  failAll(err: Error): void {
    const entries = [...this.pending.values()];
    this.pending.clear();
    for (const entry of entries) {
      entry.started.reject(err);
      entry.exit.reject(err);
      entry.launched?.reject(err);
    }
  }
}

class InProcessSpawner implements SandboxSpawner {
  private readonly router = new EventRouter();

  spawn(request: Omit<SpawnRequest, 'id'>, onOutput: Pending['onOutput']): SpawnedCommand {
    const { id, entry } = this.router.open(onOutput, false);
    runChild({ ...request, id }, (event) => this.router.deliver(event));
    return { started: entry.started.promise, exit: entry.exit.promise };
  }

  launch(request: Omit<LaunchRequest, 'id'>): SpawnedLauncher {
    const { id, entry } = this.router.open(() => undefined, true);
    runLauncher({ ...request, id }, (event) => this.router.deliver(event));
    return { started: entry.started.promise, launched: (entry.launched as Deferred<string>).promise };
  }
}

class BrokerSpawner implements SandboxSpawner {
  // While requests are open the channel keeps this process alive; idle, it does not.
  private readonly router = new EventRouter(() => this.broker?.channel?.unref());
  private broker: ChildProcess | null = null;

  spawn(request: Omit<SpawnRequest, 'id'>, onOutput: Pending['onOutput']): SpawnedCommand {
    const { entry } = this.send(request, onOutput, false);
    return { started: entry.started.promise, exit: entry.exit.promise };
  }

  launch(request: Omit<LaunchRequest, 'id'>): SpawnedLauncher {
    const { entry } = this.send(request, () => undefined, true);
    return { started: entry.started.promise, launched: (entry.launched as Deferred<string>).promise };
  }

  private send(request: Omit<SpawnRequest, 'id'> | Omit<LaunchRequest, 'id'>, onOutput: Pending['onOutput'], launcher: boolean): { id: number; entry: Pending } {
    const broker = this.broker ?? this.start();
    const opened = this.router.open(onOutput, launcher);
    broker.channel?.ref();
    broker.send({ ...request, id: opened.id }, (err) => {
      if (err) this.router.deliver({ id: opened.id, kind: 'error', message: `${request.file}: the spawn broker did not take the request (${err.message})` });
    });
    return opened;
  }

  private start(): ChildProcess {
    const broker = fork(BROKER_ENTRY, [], {
      // Plain node with type stripping: the broker imports only Node built-ins, so it needs no loader and stays small.
      execArgv: ['--experimental-strip-types', '--disable-warning=ExperimentalWarning'],
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let answered = false;
    broker.on('message', (event: ChildEvent) => {
      answered = true;
      this.router.deliver(event);
    });
    broker.once('exit', (code, signal) => {
      if (this.broker === broker) this.broker = null;
      const hint = answered
        ? 'while commands were running; they are lost to this worker'
        : `before it answered (it runs ${BROKER_ENTRY} with node --experimental-strip-types, which needs Node.js 22.6 or later; this is ${process.version}). Fix: use a newer Node.js, or set ROLLOUT_SANDBOX_SPAWN=worker to spawn from the worker`;
      this.router.failAll(transportError(`the sandbox spawn broker (pid ${broker.pid ?? '?'}) exited (${signal ?? `code ${code}`}) ${hint}`));
    });
    broker.once('error', (err) => {
      if (this.broker === broker) this.broker = null;
      this.router.failAll(transportError(`the sandbox spawn broker failed: ${err.message}`));
    });
    broker.unref();
    broker.channel?.unref();
    this.broker = broker;
    return broker;
  }
}

/** One broker per process, shared by every local provider in it. */
let sharedBroker: BrokerSpawner | null = null;

export function createSandboxSpawner(via: SpawnVia): SandboxSpawner {
  if (via === 'worker') return new InProcessSpawner();
  sharedBroker ??= new BrokerSpawner();
  return sharedBroker;
}
