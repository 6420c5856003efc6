/**
 * The local sandbox provider: one sandbox = Linux namespaces (pid, mount, net,
 * ipc, uts, cgroup) built by bubblewrap, over a private overlayfs whose lower
 * layer is the task's starting files and whose upper layer is a size-limited
 * tmpfs. The host's /usr is the read-only toolchain; nothing else of the host
 * (/root, /home, the checkout, the worker's environment) is visible.
 *
 * One file per lifecycle stage:
 *   provision.ts   record on disk -> cgroup -> private mount namespace with
 *                  tmpfs + overlay -> bwrap -> pid 1 inside reports ready
 *   exec.ts        enter the namespaces of pid 1, drop every capability, clear
 *                  the environment, bound the runtime
 *   teardown.ts    SIGKILL pid 1, kill what the cgroup holds, remove cgroups
 *                  and the state directory
 *   pool/          sandboxes provisioned ahead of demand (off unless
 *                  ROLLOUT_SANDBOX_POOL_MAX or the pool option says how many)
 * This class holds what they share (localSandboxContext.ts; its options in
 * localSandboxOptions.ts) and the provider
 * interface around them.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { ClassifiedError } from '../../shared/failures.js';
import {
  LocalSandboxHandleSchema,
  SandboxSpecSchema,
  type ExecOptions,
  type ExecResult,
  type LocalSandboxHandle,
  type ProvisionResult,
  type ReadFileOptions,
  type SandboxHandle,
  type SandboxLossEvidence,
  type SandboxProvider,
  type SandboxRecord,
  type SandboxSpec,
  type SandboxStateDigest,
  type TeardownReport,
} from '../../shared/sandbox.js';
import { provisionBeside } from './besideSandbox.js';
import { detachStrayLayers, writableLayerSetting } from './diskLayer.js';
import { runInSandbox, type RunOptions, type RunResult } from './exec.js';
import { chooseHelper } from './helper/execHelper.js';
import { checkHostCapabilities, DEFAULT_HOST_PROGRAMS } from './hostCapabilities.js';
import { holderAlive, isThisProcess, thisProcess } from './holderProcess.js';
import { errorText, sandboxError, type LocalSandboxContext } from './localSandboxContext.js';
import { DEFAULT_STATE_ROOT, poolFromEnv, spawnViaFromEnv, type LocalSandboxProviderOptions } from './localSandboxOptions.js';
import { sandboxLossEvidence } from './lossEvidence.js';
import { isLiveProcess, isSameProcess } from './procfs.js';
import { readInSandboxRoot } from './agentRoot/rootedRead.js';
import { SandboxPool } from './pool/sandboxPool.js';
import { checkLowerLayer, provisionSandbox } from './provision.js';
import { SandboxRegistry } from './sandboxRegistry.js';
import { GROUP, HOSTS, NSSWITCH, PASSWD } from './sandboxScripts.js';
import { createSandboxSpawner } from './sandboxSpawner.js';
import { StateDigester } from './agentRoot/stateDigest.js';
import { lingeringProcesses, stopSandboxProcesses } from './stopProcesses.js';
import { sandboxTamperEvidence } from './agentRoot/tamperScan.js';
import { teardownSandbox } from './teardown.js';
import { detachUserNetwork, SANDBOX_RESOLV_CONF } from './userNetwork.js';

export { TeardownIncompleteError } from './localSandboxContext.js';
export { INIT_EXIT_FILE } from './sandboxScripts.js';
export type { LocalSandboxProviderOptions } from './localSandboxOptions.js';

/** Reasons for the program chain already said in this process (one line per reason, not per provider). */
const noticesGiven = new Set<string>();

export class LocalSandboxProvider implements SandboxProvider {
  readonly name = 'local';
  readonly registry: SandboxRegistry;
  /** The compiled helper in use, or null when commands go through the program chain. */
  readonly execHelper: string | null;
  private readonly ctx: LocalSandboxContext;
  private readonly defaultExecTimeoutMs: number;
  private readonly defaultMaxOutputBytes: number;
  private readonly maxFileBytes: number;
  private hostReady: Promise<void> | undefined;
  /** Ready sandboxes, or null when the pool is off. */
  readonly pool: SandboxPool | null;
  private readonly digester: StateDigester;

  constructor(options: LocalSandboxProviderOptions = {}) {
    this.registry = new SandboxRegistry(options.stateRoot ?? process.env.ROLLOUT_SANDBOX_ROOT ?? DEFAULT_STATE_ROOT);
    const helper = chooseHelper(options.execHelper);
    this.execHelper = helper.path;
    const notice = options.notice ?? ((m: string): void => void process.stderr.write(`${m}\n`));
    if (helper.fallbackReason && !noticesGiven.has(helper.fallbackReason)) {
      noticesGiven.add(helper.fallbackReason);
      notice(`local sandbox provider: entering sandboxes through sh + nsenter + setpriv (four program starts per exec), not the compiled helper: ${helper.fallbackReason}`);
    }
    this.ctx = {
      registry: this.registry,
      programs: { ...DEFAULT_HOST_PROGRAMS, ...options.programs },
      cgroupRoot: options.cgroupRoot ?? '/sys/fs/cgroup',
      host: hostname(),
      etcDir: join(this.registry.root, '.etc'),
      spawner: createSandboxSpawner(options.spawnVia ?? spawnViaFromEnv()),
      helper: helper.path,
      defaultDiskMb: options.defaultDiskMb ?? 1024,
      writableLayer: options.writableLayer ?? writableLayerSetting(),
      provisionTimeoutMs: options.provisionTimeoutMs ?? 15_000,
      claimed: new Set(),
    };
    this.defaultExecTimeoutMs = options.defaultExecTimeoutMs ?? 10 * 60 * 1000;
    this.defaultMaxOutputBytes = options.defaultMaxOutputBytes ?? 1024 * 1024;
    this.maxFileBytes = options.maxFileBytes ?? 64 * 1024 * 1024;
    const pool = options.pool ?? poolFromEnv();
    this.digester = new StateDigester(this.ctx);
    this.pool = pool.max > 0 ? new SandboxPool(this.ctx, pool, (spec) => provisionSandbox(this.ctx, spec, (id) => this.teardown(id)), (id) => this.teardown(id), notice) : null;
  }

  /** Checks the host once and writes the synthetic /etc files every sandbox binds; a failure is retried by the next provision. */
  private ensureHost(): Promise<void> {
    this.hostReady ??= (async () => {
      checkHostCapabilities(this.ctx.programs);
      const etc = this.ctx.etcDir;
      await mkdir(etc, { recursive: true });
      await Promise.all([
        writeFile(join(etc, 'passwd'), PASSWD),
        writeFile(join(etc, 'group'), GROUP),
        writeFile(join(etc, 'hosts'), HOSTS),
        writeFile(join(etc, 'hostname'), 'sandbox\n'),
        writeFile(join(etc, 'nsswitch.conf'), NSSWITCH),
        writeFile(join(etc, 'resolv.conf'), SANDBOX_RESOLV_CONF),
      ]);
    })().catch((err: unknown) => {
      this.hostReady = undefined;
      if (err instanceof ClassifiedError) throw err;
      throw sandboxError('provision_failed', `local sandbox provider: cannot prepare ${this.ctx.etcDir} on this host: ${errorText(err)}`, err);
    });
    return this.hostReady;
  }

  async provision(input: SandboxSpec): Promise<ProvisionResult> {
    const parsed = SandboxSpecSchema.safeParse(input);
    if (!parsed.success) {
      throw new ClassifiedError('task', 'invalid_spec', `sandbox spec: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    }
    const spec = parsed.data;
    await this.ensureHost();
    await checkLowerLayer(spec);
    const ready = await this.pool?.take(spec);
    if (ready) return ready;
    return provisionSandbox(this.ctx, spec, (id) => this.teardown(id));
  }

  /** Tears down the sandboxes the pool holds ready (worker shutdown); provisions after it do without the pool. */
  async close(): Promise<void> {
    await this.pool?.drain();
  }

  private parseHandle(handle: SandboxHandle): LocalSandboxHandle {
    const parsed = LocalSandboxHandleSchema.safeParse(handle);
    if (!parsed.success) throw sandboxError('exec_transport', `not a local sandbox handle: ${parsed.error.message}`);
    const h = parsed.data;
    if (h.host !== this.ctx.host) {
      throw sandboxError('exec_transport', `sandbox ${h.id} lives on host ${h.host}; this is ${this.ctx.host}. Route the call to that host's task queue.`);
    }
    if (!isLiveProcess(h.pid, h.pidStartTime)) {
      throw sandboxError('sandbox_lost', `sandbox ${h.id} is gone: its init process (pid ${h.pid}) no longer runs`);
    }
    return h;
  }

  private async run(h: LocalSandboxHandle, inner: string[], options: RunOptions): Promise<RunResult> {
    await this.claim(h.id);
    return runInSandbox(this.ctx, h, inner, options);
  }

  /** A sandbox beside a live one, for its verifier (besideSandbox.ts): its root filesystem and network, processes and /tests of its own. */
  async provisionBeside(handle: SandboxHandle, options: { labels?: Record<string, string> } = {}): Promise<ProvisionResult> {
    await this.ensureHost();
    return provisionBeside(this.ctx, this.parseHandle(handle), options.labels ?? {}, (id) => this.teardown(id));
  }

  /** SIGKILLs, from the host, every process of the sandbox but its init (pid 1 inside). */
  async stopProcesses(handle: SandboxHandle): Promise<number> {
    return stopSandboxProcesses(this.parseHandle(handle));
  }

  async disconnectNetwork(handle: SandboxHandle): Promise<void> {
    // slirp4netns owns tap0: once it is gone, so is the interface and every route through it.
    await detachUserNetwork(this.parseHandle(handle).stateDir);
  }

  /** The digest of the files the agent can have changed (stateDigest.ts), read from the host. */
  async stateDigest(handle: SandboxHandle): Promise<SandboxStateDigest> {
    return this.digester.digest(this.parseHandle(handle));
  }

  async lossEvidence(handle: SandboxHandle): Promise<SandboxLossEvidence> {
    return sandboxLossEvidence(this.ctx, handle);
  }

  async exec(handle: SandboxHandle, command: string, options: ExecOptions = {}): Promise<ExecResult> {
    const h = this.parseHandle(handle);
    const cwd = options.cwd ?? h.workdir;
    // --norc: stdin is a socket (Node's pipes are socketpairs), which bash takes for rshd/sshd and then sources
    // /etc/bash.bashrc and ~/.bashrc before the command. ~/.bashrc is the agent's to write, so without this it
    // would run first in every later exec, the verifier's reset and tests included.
    const result = await this.run(h, [this.ctx.programs.bash, '--norc', '--noprofile', '-c', 'cd -- "$1" || exit 125; eval "$2"', 'bash', cwd, command], {
      env: options.env ?? {},
      ...(options.stdin !== undefined ? { stdin: options.stdin } : {}),
      maxOutputBytes: options.maxOutputBytes ?? this.defaultMaxOutputBytes,
      timeoutMs: options.timeoutMs ?? this.defaultExecTimeoutMs,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.key !== undefined ? { key: options.key } : {}),
    });
    if (!isLiveProcess(h.pid, h.pidStartTime)) {
      throw sandboxError('sandbox_lost', `sandbox ${h.id} died during: ${command.slice(0, 200)}`);
    }
    return {
      exitCode: result.exitCode,
      stdout: result.stdout.text(),
      stderr: result.stderr.text(),
      timedOut: result.timedOut,
      durationMs: result.durationMs,
      stdoutTruncated: result.stdout.truncated,
      stderrTruncated: result.stderr.truncated,
    };
  }

  async writeFile(handle: SandboxHandle, path: string, content: string | Uint8Array): Promise<void> {
    const h = this.parseHandle(handle);
    const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
    if (bytes.byteLength > this.maxFileBytes) {
      throw new RangeError(`writeFile ${path}: ${bytes.byteLength} bytes exceeds the ${this.maxFileBytes}-byte limit (maxFileBytes)`);
    }
    const result = await this.run(h, [this.ctx.programs.sh, '-c', 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"', 'rollout-write', path], {
      env: {},
      stdin: bytes,
      maxOutputBytes: 4096,
      timeoutMs: 60_000,
    });
    if (result.exitCode !== 0) throw new Error(`writeFile ${path} in sandbox ${h.id} failed (exit ${result.exitCode}): ${result.stderr.text().trim()}`);
  }

  async readFile(handle: SandboxHandle, path: string, options: ReadFileOptions = {}): Promise<Uint8Array> {
    const h = this.parseHandle(handle);
    const maxBytes = options.maxBytes ?? this.maxFileBytes;
    const result = await this.run(h, ['/usr/bin/cat', '--', path], {
      env: {},
      maxOutputBytes: maxBytes,
      timeoutMs: 60_000,
    });
    if (result.exitCode !== 0) throw new Error(`readFile ${path} in sandbox ${h.id} failed (exit ${result.exitCode}): ${result.stderr.text().trim()}`);
    if (result.stdout.truncated) {
      throw new RangeError(`readFile ${path}: the file has more than ${maxBytes} bytes (maxBytes); read it in parts with exec (head -c / tail -c)`);
    }
    return new Uint8Array(result.stdout.bytes());
  }

  async readTrusted(handle: SandboxHandle, path: string, options: ReadFileOptions = {}): Promise<Uint8Array> {
    const h = this.parseHandle(handle);
    return readInSandboxRoot(h.pid, h.pidStartTime, path, options.maxBytes ?? this.maxFileBytes);
  }

  async tamperEvidence(handle: SandboxHandle): Promise<string[]> {
    return sandboxTamperEvidence(this.ctx, this.parseHandle(handle));
  }

  async lingeringProcesses(handle: SandboxHandle): Promise<number> {
    return lingeringProcesses(this.parseHandle(handle));
  }

  async renewLease(handle: SandboxHandle, leaseMs: number): Promise<void> {
    const record = await this.registry.get(handle.id);
    if (!record) throw sandboxError('sandbox_lost', `sandbox ${handle.id} has no record; it was torn down`);
    record.leaseExpiresAt = new Date(Date.now() + leaseMs).toISOString();
    await this.registry.write(record);
  }

  /** Records this process as the sandbox's holder when another one (a worker that died) held it. */
  private async claim(id: string): Promise<void> {
    if (this.ctx.claimed.has(id)) return;
    try {
      const record = await this.registry.get(id);
      if (!record) return;
      if (!record.holder || !isThisProcess(record.holder)) await this.registry.write({ ...record, holder: thisProcess() });
      this.ctx.claimed.add(id);
    } catch {
      // torn down meanwhile: the command that follows reports it
    }
  }

  /** One readdir of the registry: list() reads and validates every record and checks every init (about 0.1 ms each). */
  async count(): Promise<number> {
    return (await this.registry.listIds()).length;
  }

  async list(labels: Record<string, string> = {}): Promise<SandboxRecord[]> {
    const out: SandboxRecord[] = [];
    for (const id of await this.registry.listIds()) {
      const record = await this.registry.get(id);
      if (!record) continue;
      if (!Object.entries(labels).every(([k, v]) => record.labels[k] === v)) continue;
      out.push({
        id: record.id,
        provider: 'local',
        owner: record.owner,
        labels: record.labels,
        createdAt: record.createdAt,
        leaseExpiresAt: record.leaseExpiresAt,
        handle: record.handle,
        alive: record.handle !== null && isSameProcess(record.handle.pid, record.handle.pidStartTime),
        ...(record.holder ? { holderAlive: holderAlive(record.holder), heldByThisProcess: isThisProcess(record.holder) } : {}),
      });
    }
    return out;
  }

  async sweepStrays(): Promise<string[]> {
    return (await detachStrayLayers()).map((s) => `loop device ${s.device} of the deleted layer ${s.backingFile.replace(/ \(deleted\)$/, '')}`);
  }

  async teardown(handleOrId: SandboxHandle | string): Promise<TeardownReport> {
    return teardownSandbox(this.ctx, handleOrId);
  }
}
