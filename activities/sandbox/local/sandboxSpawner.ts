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
import { ClassifiedError } from '../../../shared/failures.js';
import { runChild, type ChildEvent, type SpawnRequest } from './spawnBroker.js';

export type SpawnVia = 'broker' | 'worker';
export const SPAWN_VIA: readonly SpawnVia[] = ['broker', 'worker'];

export interface SpawnedCommand {
  /** The command's pid (it leads its own process group); rejects when it could not be started. */
  started: Promise<number>;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; totalBytes: { stdout: number; stderr: number } }>;
}

export interface SandboxSpawner {
  readonly via: SpawnVia;
  spawn(request: Omit<SpawnRequest, 'id'>, onOutput: (stream: 'stdout' | 'stderr', chunk: Buffer) => void): SpawnedCommand;
  /** Stops the broker process, if any (commands it started keep running); the next spawn starts a new one. */
  close(): void;
}

const BROKER_ENTRY = fileURLToPath(new URL('./spawnBroker.ts', import.meta.url));

function transportError(message: string): ClassifiedError<'infra'> {
  return new ClassifiedError('infra', 'exec_transport', message);
}

interface Pending {
  onOutput: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  started: { resolve: (pid: number) => void; reject: (err: Error) => void };
  exit: { resolve: (v: Awaited<SpawnedCommand['exit']>) => void; reject: (err: Error) => void };
}

/** Routes events of runChild (here or in the broker) to the command they belong to. */
class EventRouter {
  private nextId = 1;
  readonly pending = new Map<number, Pending>();

  open(onOutput: Pending['onOutput']): { id: number; command: SpawnedCommand } {
    const id = this.nextId++;
    let entry!: Pending;
    const started = new Promise<number>((resolve, reject) => {
      entry = { onOutput, started: { resolve, reject }, exit: { resolve: () => undefined, reject: () => undefined } };
    });
    const exit = new Promise<Awaited<SpawnedCommand['exit']>>((resolve, reject) => {
      entry.exit = { resolve, reject };
    });
    // A command that never started also never exits; nobody awaits exit then.
    exit.catch(() => undefined);
    this.pending.set(id, entry);
    return { id, command: { started, exit } };
  }

  deliver(event: ChildEvent): void {
    const entry = this.pending.get(event.id);
    if (!entry) return;
    switch (event.kind) {
      case 'started':
        entry.started.resolve(event.pid);
        break;
      case 'output':
        entry.onOutput(event.stream, Buffer.isBuffer(event.chunk) ? event.chunk : Buffer.from(event.chunk.buffer, event.chunk.byteOffset, event.chunk.byteLength));
        break;
      case 'exit':
        this.pending.delete(event.id);
        entry.exit.resolve({ code: event.code, signal: event.signal as NodeJS.Signals | null, totalBytes: event.totalBytes });
        break;
      case 'error': {
        this.pending.delete(event.id);
        const err = transportError(`cannot start ${event.message}`);
        entry.started.reject(err);
        entry.exit.reject(err);
        break;
      }
    }
  }

  failAll(err: Error): void {
    for (const entry of this.pending.values()) {
      entry.started.reject(err);
      entry.exit.reject(err);
    }
    this.pending.clear();
  }
}

class InProcessSpawner implements SandboxSpawner {
  readonly via = 'worker';
  private readonly router = new EventRouter();

  spawn(request: Omit<SpawnRequest, 'id'>, onOutput: Pending['onOutput']): SpawnedCommand {
    const { id, command } = this.router.open(onOutput);
    runChild({ ...request, id }, (event) => this.router.deliver(event));
    return command;
  }

  close(): void {}
}

class BrokerSpawner implements SandboxSpawner {
  readonly via = 'broker';
  private readonly router = new EventRouter();
  private broker: ChildProcess | null = null;

  spawn(request: Omit<SpawnRequest, 'id'>, onOutput: Pending['onOutput']): SpawnedCommand {
    const broker = this.broker ?? this.start();
    const { id, command } = this.router.open(onOutput);
    // While commands are open the channel keeps this process alive; idle, it does not.
    broker.channel?.ref();
    const settle = (): void => {
      if (this.router.pending.size === 0) this.broker?.channel?.unref();
    };
    command.exit.then(settle, settle);
    command.started.catch(settle);
    broker.send({ ...request, id } satisfies SpawnRequest, (err) => {
      if (err) this.router.deliver({ id, kind: 'error', message: `${request.file}: the spawn broker did not take the request (${err.message})` });
    });
    return command;
  }

  private start(): ChildProcess {
    const broker = fork(BROKER_ENTRY, [], {
      // Plain node with type stripping: the broker imports only Node built-ins, so it needs no loader and stays small.
      execArgv: ['--experimental-strip-types', '--disable-warning=ExperimentalWarning'],
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    broker.on('message', (event: ChildEvent) => this.router.deliver(event));
    broker.once('exit', (code, signal) => {
      if (this.broker === broker) this.broker = null;
      this.router.failAll(transportError(`the sandbox spawn broker (pid ${broker.pid ?? '?'}) exited (${signal ?? `code ${code}`}) while commands were running; they are lost to this worker`));
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

  close(): void {
    const broker = this.broker;
    this.broker = null;
    if (broker && broker.exitCode === null && broker.signalCode === null) broker.disconnect();
  }
}

/** One broker per process, shared by every local provider in it. */
let sharedBroker: BrokerSpawner | null = null;

export function createSandboxSpawner(via: SpawnVia): SandboxSpawner {
  if (via === 'worker') return new InProcessSpawner();
  sharedBroker ??= new BrokerSpawner();
  return sharedBroker;
}
