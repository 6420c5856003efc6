/**
 * The local sandbox provider: one sandbox = Linux namespaces (pid, mount, net,
 * ipc, uts, cgroup) built by bubblewrap, over a private overlayfs whose lower
 * layer is the task's starting files and whose upper layer is a size-limited
 * tmpfs. The host's /usr is the read-only toolchain; nothing else of the host
 * (/root, /home, the checkout, the worker's environment) is visible.
 *
 * Lifecycle of one sandbox:
 *   provision: record on disk -> cgroup -> `unshare --mount` (private mount
 *              namespace) mounts tmpfs + overlay -> exec bwrap -> pid 1 inside
 *              reports ready. The overlay lives only in that private namespace,
 *              so it disappears with the sandbox and never shows on the host.
 *   exec:      nsenter into the namespaces of pid 1, drop every capability
 *              (setpriv), clear the environment (env -i), bound the runtime
 *              (timeout kills the command's process group).
 *   teardown:  SIGKILL pid 1 (the kernel kills the whole pid namespace), kill
 *              whatever the cgroup still holds, remove cgroups and the state
 *              directory. Idempotent and safe to run concurrently.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { constants as osConstants, hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { ClassifiedError } from '../../../shared/failures.js';
import {
  LocalSandboxHandleSchema,
  SandboxSpecSchema,
  type EnforcedLimits,
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
  type TeardownReport,
} from '../../../shared/sandbox.js';
import { BoundedOutput } from '../boundedOutput.js';
import { cgroupOomKills, cgroupPids, createSandboxCgroup, killCgroupProcesses, removeCgroups, type CgroupPlacement } from './cgroups.js';
import { checkHostCapabilities, DEFAULT_HOST_PROGRAMS, type HostPrograms } from './hostCapabilities.js';
import { innermostPid, isSameProcess, namespaceOf, processesInNamespace, processStartTime } from './procfs.js';
import { holderAlive, isThisProcess, thisProcess } from './holderProcess.js';
import { SandboxRegistry, type StoredRecord } from './sandboxRegistry.js';
import { createSandboxSpawner, LauncherExited, SPAWN_VIA, type SandboxSpawner, type SpawnVia } from './sandboxSpawner.js';
import { attachUserNetwork, detachUserNetwork, SANDBOX_RESOLV_CONF } from './userNetwork.js';

export interface LocalSandboxProviderOptions {
  /** Where sandbox state directories and records live. */
  stateRoot?: string;
  programs?: Partial<HostPrograms>;
  /** cgroup filesystem root; tests point it elsewhere to exercise the rlimit fallback. */
  cgroupRoot?: string;
  /** Writable layer size when the spec sets no diskMb. */
  defaultDiskMb?: number;
  defaultExecTimeoutMs?: number;
  defaultMaxOutputBytes?: number;
  /** Largest file writeFile accepts and readFile returns by default. */
  maxFileBytes?: number;
  provisionTimeoutMs?: number;
  /**
   * Where sandbox commands are spawned: 'broker' (default), a small process forked on first use, so a
   * spawn does not fork this whole worker; 'worker', this process. Env ROLLOUT_SANDBOX_SPAWN.
   */
  spawnVia?: SpawnVia;
}

export const DEFAULT_STATE_ROOT = '/var/lib/rollout-pipeline/sandboxes';
const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
function spawnViaFromEnv(): SpawnVia {
  const value = process.env.ROLLOUT_SANDBOX_SPAWN;
  if (value === undefined || value === '') return 'broker';
  if ((SPAWN_VIA as readonly string[]).includes(value)) return value as SpawnVia;
  throw new Error(`ROLLOUT_SANDBOX_SPAWN=${JSON.stringify(value)}: use one of ${SPAWN_VIA.join(', ')} (or unset it for broker)`);
}

/** Grace between SIGTERM and SIGKILL for a command that ran out of time. */
const KILL_AFTER_MS = 2_000;

/**
 * Shell run by `unshare --mount`: mounts the writable layer and overlay in the
 * private namespace, runs bwrap, and writes how the sandbox's init ended to
 * `init-exit` in the state directory (bwrap's status: 137 when the host
 * SIGKILLed it; anything else means it exited on its own). Failure
 * attribution reads it (lossEvidence).
 */
const MOUNT_SCRIPT = [
  'set -e',
  'state=$1; lower=$2; size=$3; shift 3',
  'mount -t tmpfs -o "size=$size,mode=0755" rollout-rw "$state/rw"',
  'mkdir "$state/rw/upper" "$state/rw/work"',
  'mount -t overlay overlay -o "lowerdir=$lower,upperdir=$state/rw/upper,workdir=$state/rw/work" "$state/merged"',
  'set +e',
  '"$@"',
  'echo $? > "$state/init-exit"',
].join('\n');
export const INIT_EXIT_FILE = 'init-exit';

/** Joins the sandbox's cgroups (paths in ROLLOUT_CGROUP_PROCS), then becomes the given command. */
const JOIN_CGROUP_SCRIPT = 'for f in $ROLLOUT_CGROUP_PROCS; do echo $$ > "$f" || exit 97; done; unset ROLLOUT_CGROUP_PROCS; exec "$@"';

/**
 * The sandbox's init (pid 1, bwrap --as-pid-1): tells the host it is up (fd 4),
 * then idles until teardown, reaping orphans as they die. The kernel drops
 * every signal that processes of a pid namespace send its init unless the init
 * handles it, and this one ignores all it could handle, so nothing inside the
 * sandbox can end it: an agent that kills every process it may signal
 * (`kill -9 -1`) leaves a live sandbox to verify. Only the host ends it.
 * Builtins only (read -t, wait): no child of its own for stopProcesses to kill.
 */
const KEEPER_SCRIPT = [
  "trap '' HUP INT QUIT TERM USR1 USR2 ALRM PIPE TSTP TTIN TTOU",
  // Reaps at once when an orphan dies: a killed fork bomb's zombies would hold the pids limit.
  "trap 'wait' CHLD",
  'mkfifo /tmp/.rollout-init && exec 5<>/tmp/.rollout-init && rm -f /tmp/.rollout-init || exit 96',
  'echo ready >&4; exec 4>&-',
  'while :; do read -r -t 1 -u 5 _ || wait; done',
].join('\n');

const PASSWD = 'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n';
const GROUP = 'root:x:0:\nnogroup:x:65534:\n';
const HOSTS = '127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n';
/** Parts of /proc that write to the host kernel; the sysctls under /proc/sys/net stay per namespace when bound from the host. */
const PROC_READ_ONLY = ['/proc/sys', '/proc/sysrq-trigger', '/proc/fs', '/proc/bus', '/proc/irq'];
/** Host /etc entries that programs need and that say nothing about the host. */
const HOST_ETC_ENTRIES = ['ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'alternatives', 'nsswitch.conf', 'localtime', 'ssl', 'ca-certificates', 'mime.types', 'python3', 'python3.11', 'bash.bashrc', 'inputrc', 'profile'];

/**
 * Kills the process group of an exec recorded under the same key that still
 * runs (its worker died mid-command), and waits until it is gone.
 */
async function killSupersededExec(keyFile: string): Promise<void> {
  let recorded: string;
  try {
    recorded = readFileSync(keyFile, 'utf8').trim();
  } catch {
    return;
  }
  const [pidText, startTime = ''] = recorded.split(' ');
  const pid = Number(pidText);
  if (Number.isInteger(pid) && pid > 0 && isSameProcess(pid, startTime)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
    for (let i = 0; i < 100 && isSameProcess(pid, startTime); i++) await new Promise((r) => setTimeout(r, 20));
  }
  rmSync(keyFile, { force: true });
}

/** How many children of `pid` are zombies (dead, not yet reaped). */
function zombieChildren(pid: number): number {
  let children: string[];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  } catch {
    return 0;
  }
  return children.filter((c) => {
    try {
      return /^\d+ \(.*\) Z /s.test(readFileSync(`/proc/${c}/stat`, 'utf8'));
    } catch {
      return false;
    }
  }).length;
}

function sandboxError(type: 'provision_failed' | 'provision_timeout' | 'sandbox_lost' | 'exec_transport', message: string, cause?: unknown): ClassifiedError<'infra'> {
  return new ClassifiedError('infra', type, message, cause === undefined ? undefined : { cause });
}

function readTail(file: string, max = 2000): string {
  try {
    const text = readFileSync(file, 'utf8').trim();
    return text.length > max ? `...${text.slice(-max)}` : text;
  } catch {
    return '';
  }
}

/** Teardown could not finish yet; the record stays on disk so a retry (or the reaper) completes it. */
export class TeardownIncompleteError extends Error {
  override readonly name = 'TeardownIncompleteError';
}

export class LocalSandboxProvider implements SandboxProvider {
  readonly name = 'local';
  readonly registry: SandboxRegistry;
  private readonly programs: HostPrograms;
  private readonly cgroupRoot: string;
  private readonly defaultDiskMb: number;
  private readonly defaultExecTimeoutMs: number;
  private readonly defaultMaxOutputBytes: number;
  private readonly maxFileBytes: number;
  private readonly provisionTimeoutMs: number;
  private readonly host = hostname();
  private readonly etcDir: string;
  private capabilitiesChecked = false;
  /** Sandboxes whose record names this process as holder (checked once per sandbox, not on every exec). */
  private readonly claimed = new Set<string>();
  private readonly spawner: SandboxSpawner;

  constructor(options: LocalSandboxProviderOptions = {}) {
    this.spawner = createSandboxSpawner(options.spawnVia ?? spawnViaFromEnv());
    this.registry = new SandboxRegistry(options.stateRoot ?? process.env.ROLLOUT_SANDBOX_ROOT ?? DEFAULT_STATE_ROOT);
    this.programs = { ...DEFAULT_HOST_PROGRAMS, ...options.programs };
    this.cgroupRoot = options.cgroupRoot ?? '/sys/fs/cgroup';
    this.defaultDiskMb = options.defaultDiskMb ?? 1024;
    this.defaultExecTimeoutMs = options.defaultExecTimeoutMs ?? 10 * 60 * 1000;
    this.defaultMaxOutputBytes = options.defaultMaxOutputBytes ?? 1024 * 1024;
    this.maxFileBytes = options.maxFileBytes ?? 64 * 1024 * 1024;
    this.provisionTimeoutMs = options.provisionTimeoutMs ?? 15_000;
    this.etcDir = join(this.registry.root, '.etc');
  }

  private ensureHost(): void {
    if (this.capabilitiesChecked) return;
    checkHostCapabilities(this.programs);
    mkdirSync(this.etcDir, { recursive: true });
    writeFileSync(join(this.etcDir, 'passwd'), PASSWD);
    writeFileSync(join(this.etcDir, 'group'), GROUP);
    writeFileSync(join(this.etcDir, 'hosts'), HOSTS);
    writeFileSync(join(this.etcDir, 'hostname'), 'sandbox\n');
    writeFileSync(join(this.etcDir, 'resolv.conf'), SANDBOX_RESOLV_CONF);
    this.capabilitiesChecked = true;
  }

  async provision(input: SandboxSpec): Promise<ProvisionResult> {
    const parsed = SandboxSpecSchema.safeParse(input);
    if (!parsed.success) {
      throw new ClassifiedError('task', 'invalid_spec', `sandbox spec: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    }
    const spec = parsed.data;
    try {
      this.ensureHost();
    } catch (err) {
      if (err instanceof ClassifiedError) throw err;
      throw sandboxError('provision_failed', `local sandbox provider: cannot prepare ${this.etcDir} on this host: ${err instanceof Error ? err.message : String(err)}`, err);
    }
    const lower = spec.rootfs ?? spec.environmentDir;
    const field = spec.rootfs ? 'rootfs' : 'environmentDir';
    if (!lower.startsWith('/') || /[,:\n]/.test(lower)) {
      throw new ClassifiedError('task', 'invalid_spec', `sandbox spec: ${field} ${JSON.stringify(lower)} must be an absolute path without ',' ':' or newlines (overlayfs cannot take them)`);
    }
    let isDir = false;
    try {
      isDir = statSync(lower).isDirectory();
    } catch {
      // reported below
    }
    if (!isDir) {
      const fix = spec.rootfs ? 'build the task image again (rollout env build)' : "create it (an empty one is fine) or fix the task's environment/ path";
      throw new ClassifiedError('task', 'invalid_spec', `sandbox spec: ${field} ${lower} is not a directory; ${fix}`);
    }

    const id = `sbx-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
    const stateDir = this.registry.stateDir(id);
    const now = Date.now();
    const record: StoredRecord = {
      id,
      provider: 'local',
      owner: spec.owner,
      labels: spec.labels,
      createdAt: new Date(now).toISOString(),
      leaseExpiresAt: new Date(now + spec.leaseMs).toISOString(),
      stateDir,
      launcherPid: null,
      cgroupDirs: [],
      handle: null,
      holder: thisProcess(),
    };
    try {
      mkdirSync(join(stateDir, 'rw'), { recursive: true });
      mkdirSync(join(stateDir, 'merged'));
      this.registry.write(record);
      this.claimed.add(id);
    } catch (err) {
      // The host's disk is full (or the state root unwritable): nothing of this sandbox may stay behind.
      rmSync(stateDir, { recursive: true, force: true });
      throw sandboxError('provision_failed', `local sandbox ${id}: cannot write its state under ${this.registry.root} on this host: ${err instanceof Error ? err.message : String(err)}`, err);
    }

    try {
      return await this.launch(spec, id, stateDir, record);
    } catch (err) {
      await this.teardown(id).catch(() => undefined);
      if (err instanceof ClassifiedError) throw err;
      throw sandboxError('provision_failed', `local sandbox ${id}: ${err instanceof Error ? err.message : String(err)}`, err);
    }
  }

  private async launch(spec: ReturnType<typeof SandboxSpecSchema.parse>, id: string, stateDir: string, record: StoredRecord): Promise<ProvisionResult> {
    const diskMb = spec.limits.diskMb ?? this.defaultDiskMb;
    const cgroup: CgroupPlacement | undefined = createSandboxCgroup(id, spec.limits, this.cgroupRoot);
    record.cgroupDirs = cgroup?.dirs ?? [];
    this.registry.write(record);
    const enforcedLimits: EnforcedLimits = {
      memory: cgroup?.memory ?? (spec.limits.memoryMb === undefined ? 'not-requested' : 'rlimit'),
      // RLIMIT_NPROC counts every process of the uid host-wide: useless for root, so not claimed.
      pids: cgroup?.pids ?? (spec.limits.pids === undefined ? 'not-requested' : 'not-enforced'),
      cpu: cgroup?.cpu ?? (spec.limits.cpus === undefined ? 'not-requested' : 'not-enforced'),
      disk: 'tmpfs-size',
    };
    const rlimitPrefix = this.rlimitPrefix(spec.limits.memoryMb, enforcedLimits);

    const bwrapArgs = this.bwrapArgs(spec, stateDir, diskMb);
    const argv = [
      ...this.cgroupJoinPrefix(cgroup),
      ...rlimitPrefix,
      this.programs.unshare, '--mount', '--propagation', 'private', '--',
      this.programs.sh, '-c', MOUNT_SCRIPT, 'rollout-sandbox-mount', stateDir, spec.rootfs ?? spec.environmentDir, `${diskMb}m`,
      this.programs.bwrap, ...bwrapArgs,
    ];
    const logFile = join(stateDir, 'launch.log');
    const launcher = this.spawner.launch({
      launch: true,
      file: argv[0] as string,
      args: argv.slice(1),
      env: { PATH: SANDBOX_PATH, ROLLOUT_CGROUP_PROCS: cgroup?.procFiles.join(' ') ?? '' },
      logFile,
    });
    try {
      record.launcherPid = await launcher.started;
    } catch (err) {
      throw sandboxError('provision_failed', `local sandbox ${id}: cannot start ${argv[0]}: ${err instanceof Error ? err.message : String(err)}`, err);
    }
    this.registry.write(record);

    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(sandboxError('provision_timeout', `local sandbox ${id} did not come up within ${this.provisionTimeoutMs} ms; launcher log: ${readTail(logFile) || '(empty)'}`));
      }, this.provisionTimeoutMs);
    });
    let infoText: string;
    try {
      infoText = await Promise.race([launcher.launched, timedOut]);
    } catch (err) {
      if (err instanceof LauncherExited) {
        throw sandboxError('provision_failed', `local sandbox ${id}: ${err.message} before the sandbox was up: ${readTail(logFile) || '(no output)'}`);
      }
      if (err instanceof ClassifiedError) throw err;
      throw sandboxError('provision_failed', `local sandbox ${id}: ${err instanceof Error ? err.message : String(err)}`, err);
    } finally {
      clearTimeout(timer);
    }
    const childPid = (JSON.parse(infoText) as { 'child-pid'?: number })['child-pid'];
    if (typeof childPid !== 'number') throw sandboxError('provision_failed', `local sandbox ${id}: bwrap reported no child pid (${infoText})`);
    const pidStartTime = processStartTime(childPid);
    if (pidStartTime === undefined) throw sandboxError('provision_failed', `local sandbox ${id}: its init (pid ${childPid}) died at start; ${readTail(logFile)}`);

    const handle: LocalSandboxHandle = {
      provider: 'local',
      id,
      host: this.host,
      pid: childPid,
      pidStartTime,
      workdir: spec.workdir,
      stateDir,
      cgroupProcFiles: cgroup?.procFiles ?? [],
      memoryRlimitBytes: enforcedLimits.memory === 'rlimit' && spec.limits.memoryMb !== undefined ? spec.limits.memoryMb * 1024 * 1024 : null,
      ...(Object.keys(spec.env).length > 0 ? { env: spec.env } : {}),
      ...(spec.fileCapabilities.length > 0 ? { capabilities: spec.fileCapabilities } : {}),
    };
    if (spec.network === 'public') {
      await attachUserNetwork({ initPid: childPid, stateDir, prefix: this.cgroupJoinPrefix(cgroup), env: { PATH: SANDBOX_PATH, ROLLOUT_CGROUP_PROCS: cgroup?.procFiles.join(' ') ?? '' }, nsenter: this.programs.nsenter });
    }
    record.handle = handle;
    this.registry.write(record);
    return { handle, enforcedLimits };
  }

  private cgroupJoinPrefix(cgroup: CgroupPlacement | undefined): string[] {
    if (!cgroup || cgroup.procFiles.length === 0) return [];
    return [this.programs.sh, '-c', JOIN_CGROUP_SCRIPT, 'rollout-join-cgroup'];
  }

  private rlimitPrefix(memoryMb: number | undefined, enforced: EnforcedLimits): string[] {
    if (enforced.memory !== 'rlimit' || memoryMb === undefined) return [];
    return [this.programs.prlimit, `--as=${memoryMb * 1024 * 1024}`, '--'];
  }

  private bwrapArgs(spec: ReturnType<typeof SandboxSpecSchema.parse>, stateDir: string, diskMb: number): string[] {
    const args = ['--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--hostname', 'sandbox'];
    // 'public': a namespace of its own too, which slirp4netns connects once the sandbox is up (userNetwork.ts).
    if (spec.network !== 'host') args.push('--unshare-net');
    if (spec.rootfs) return [...args, ...this.imageRootArgs(spec, stateDir)];
    args.push('--ro-bind', '/usr', '/usr');
    for (const link of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
      const target = `/${link}`;
      let isLink = false;
      try {
        isLink = statSync(target).isDirectory();
      } catch {
        continue;
      }
      // Merged-/usr hosts (Debian 12) have these as symlinks into /usr; others get a read-only bind.
      if (isLink) args.push('--ro-bind', target, target);
    }
    args.push('--perms', '0755', '--dir', '/etc');
    for (const name of ['passwd', 'group', 'hosts', 'hostname', ...(spec.network === 'public' ? ['resolv.conf'] : [])]) args.push('--ro-bind', join(this.etcDir, name), `/etc/${name}`);
    for (const name of HOST_ETC_ENTRIES) args.push('--ro-bind-try', `/etc/${name}`, `/etc/${name}`);
    args.push('--proc', '/proc', '--dev', '/dev');
    // Root without capabilities may still write the sysctls of /proc/sys (mode 0644, root-owned), and
    // several of them are host-wide (kernel.core_pattern names a program the host kernel runs as root).
    // Read-only, as Docker's readonlyPaths: bwrap covers only /proc/irq and /proc/bus itself.
    for (const path of PROC_READ_ONLY) args.push('--ro-bind-try', path, path);
    args.push('--size', String(diskMb * 1024 * 1024), '--tmpfs', '/tmp');
    args.push('--tmpfs', '/root');
    // Mount points for what enters only later: tests at verify time, the reference solution for the oracle.
    args.push('--tmpfs', '/tests', '--tmpfs', '/solution');
    args.push('--tmpfs', '/logs', '--dir', '/logs/agent', '--dir', '/logs/verifier');
    args.push('--bind', join(stateDir, 'merged'), spec.workdir);
    args.push('--remount-ro', '/');
    args.push('--clearenv', '--setenv', 'PATH', SANDBOX_PATH, '--setenv', 'HOME', '/root');
    args.push('--chdir', spec.workdir, '--cap-drop', 'ALL', '--info-fd', '3', '--as-pid-1');
    args.push('--', this.programs.bash, '--norc', '--noprofile', '-c', KEEPER_SCRIPT);
    return args;
  }

  /**
   * An image sandbox: the overlay (image root filesystem below, the size-limited tmpfs above) is the
   * whole root, writable as a container's; /proc, /dev, our hosts/hostname and the Harbor mount points
   * on top. Nothing of the host is visible but what readOnlyMounts names.
   */
  private imageRootArgs(spec: ReturnType<typeof SandboxSpecSchema.parse>, stateDir: string): string[] {
    const args = ['--bind', join(stateDir, 'merged'), '/'];
    for (const name of ['hosts', 'hostname', ...(spec.network === 'public' ? ['resolv.conf'] : [])]) args.push('--ro-bind', join(this.etcDir, name), `/etc/${name}`);
    args.push('--proc', '/proc', '--dev', '/dev');
    for (const path of PROC_READ_ONLY) args.push('--ro-bind-try', path, path);
    for (const dir of ['/tmp', '/root', '/tests', '/solution', '/logs/agent', '/logs/verifier', spec.workdir]) args.push('--dir', dir);
    for (const m of spec.readOnlyMounts) args.push('--ro-bind', m.source, m.target);
    args.push('--clearenv', '--setenv', 'PATH', spec.env.PATH ?? SANDBOX_PATH, '--setenv', 'HOME', '/root');
    // The same init as on the host base (bash is what the bash tool runs in the image too).
    args.push('--chdir', spec.workdir, '--cap-drop', 'ALL', '--info-fd', '3', '--as-pid-1');
    args.push('--', this.programs.bash, '--norc', '--noprofile', '-c', KEEPER_SCRIPT);
    return args;
  }

  private parseHandle(handle: SandboxHandle): LocalSandboxHandle {
    const parsed = LocalSandboxHandleSchema.safeParse(handle);
    if (!parsed.success) throw sandboxError('exec_transport', `not a local sandbox handle: ${parsed.error.message}`);
    const h = parsed.data;
    if (h.host !== this.host) {
      throw sandboxError('exec_transport', `sandbox ${h.id} lives on host ${h.host}; this is ${this.host}. Route the call to that host's task queue.`);
    }
    if (!isSameProcess(h.pid, h.pidStartTime)) {
      throw sandboxError('sandbox_lost', `sandbox ${h.id} is gone: its init process (pid ${h.pid}) no longer runs`);
    }
    return h;
  }

  /**
   * argv that runs `inner` inside the sandbox: join its cgroups, enter its
   * namespaces and root (nsenter), drop every capability (setpriv), apply the
   * rlimit fallback. The environment is exactly what `run` passes to spawn.
   */
  private enterArgv(h: LocalSandboxHandle, inner: string[]): string[] {
    return [
      ...(h.cgroupProcFiles.length > 0 ? [this.programs.sh, '-c', JOIN_CGROUP_SCRIPT, 'rollout-join-cgroup'] : []),
      this.programs.nsenter, '-t', String(h.pid), '-m', '-p', '-n', '-i', '-u', '-r', '-w', '--',
      this.programs.setpriv, `--bounding-set=-all${(h.capabilities ?? []).map((c) => `,+${c}`).join('')}`, '--inh-caps=-all', '--no-new-privs', '--',
      ...(h.memoryRlimitBytes !== null ? [this.programs.prlimit, `--as=${h.memoryRlimitBytes}`, '--'] : []),
      ...inner,
    ];
  }

  /**
   * Runs `inner` in the sandbox. The command gets its own process group (the
   * spawned nsenter leads a new session), so on timeout the host signals the
   * whole group: SIGTERM, then SIGKILL after a grace period. A process that
   * called setsid itself keeps running until teardown, as documented.
   */
  private async run(
    h: LocalSandboxHandle,
    inner: string[],
    options: { env: Record<string, string>; stdin?: string | Uint8Array; maxOutputBytes: number; timeoutMs: number; signal?: AbortSignal; key?: string },
  ): Promise<{ exitCode: number; stdout: BoundedOutput; stderr: BoundedOutput; durationMs: number; timedOut: boolean }> {
    this.claim(h.id);
    const keyFile = options.key === undefined ? undefined : join(h.stateDir, 'execs', options.key.replace(/[^A-Za-z0-9._-]/g, '_'));
    if (keyFile) await killSupersededExec(keyFile);
    options.signal?.throwIfAborted();
    const argv = this.enterArgv(h, inner);
    const started = performance.now();
    const stdout = new BoundedOutput(options.maxOutputBytes);
    const stderr = new BoundedOutput(options.maxOutputBytes);
    const command = this.spawner.spawn(
      {
        file: argv[0] as string,
        args: argv.slice(1),
        env: {
          PATH: SANDBOX_PATH,
          HOME: '/root',
          USER: 'root',
          LANG: 'C.UTF-8',
          TERM: 'dumb',
          ...h.env,
          ...options.env,
          ...(h.cgroupProcFiles.length > 0 ? { ROLLOUT_CGROUP_PROCS: h.cgroupProcFiles.join(' ') } : {}),
        },
        stdin: options.stdin === undefined ? null : typeof options.stdin === 'string' ? Buffer.from(options.stdin, 'utf8') : options.stdin,
        maxOutputBytes: options.maxOutputBytes,
      },
      (stream, chunk) => (stream === 'stdout' ? stdout : stderr).push(chunk),
    );
    let pid: number;
    try {
      pid = await command.started;
    } catch (err) {
      throw sandboxError('exec_transport', `cannot enter sandbox ${h.id}: ${err instanceof Error ? err.message : String(err)}`, err);
    }

    let timedOut = false;
    const signalGroup = (signal: NodeJS.Signals): void => {
      try {
        process.kill(-pid, signal);
      } catch {
        // the group is already gone
      }
    };
    let killTimer: NodeJS.Timeout | undefined;
    const timeoutTimer = setTimeout(() => {
      timedOut = true;
      signalGroup('SIGTERM');
      killTimer = setTimeout(() => signalGroup('SIGKILL'), KILL_AFTER_MS);
    }, options.timeoutMs);
    const onAbort = (): void => signalGroup('SIGKILL');
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });
    if (keyFile) {
      mkdirSync(dirname(keyFile), { recursive: true });
      writeFileSync(keyFile, `${pid} ${processStartTime(pid) ?? ''}\n`);
    }

    const exitCode = await command.exit
      .then(
        ({ code, signal, totalBytes }) => {
          stdout.countUnkept(totalBytes.stdout);
          stderr.countUnkept(totalBytes.stderr);
          return code ?? 128 + (signal ? osConstants.signals[signal] : 0);
        },
        (err: unknown) => {
          throw sandboxError('exec_transport', `sandbox ${h.id}: lost the command: ${err instanceof Error ? err.message : String(err)}`, err);
        },
      )
      .finally(() => {
        clearTimeout(timeoutTimer);
        if (killTimer) clearTimeout(killTimer);
        options.signal?.removeEventListener('abort', onAbort);
        if (keyFile) rmSync(keyFile, { force: true });
      });
    options.signal?.throwIfAborted();
    if (timedOut) signalGroup('SIGKILL'); // stragglers of the timed-out group that outlived its leader
    return { exitCode, stdout, stderr, durationMs: performance.now() - started, timedOut };
  }

  /** SIGKILLs, from the host, every process of the sandbox but its init (pid 1 inside). */
  async stopProcesses(handle: SandboxHandle): Promise<number> {
    const h = this.parseHandle(handle);
    const ns = namespaceOf(h.pid, 'pid');
    if (!ns) throw sandboxError('sandbox_lost', `sandbox ${h.id} is gone: no pid namespace for its init ${h.pid}`);
    const killed = new Set<number>();
    // The sandbox's cgroup lists its processes (every exec joins it first); a scan of all of /proc costs a
    // readlink per process on the host, which at 1,000 sandboxes alive made each verify O(host processes).
    // Its members include the exec machinery still outside the pid namespace (join shell, nsenter): keep only those inside.
    const inNamespace = (): number[] => {
      const procs = h.cgroupProcFiles[0];
      if (procs !== undefined) {
        try {
          return readFileSync(procs, 'utf8').split('\n').filter(Boolean).map(Number).filter((p) => namespaceOf(p, 'pid') === ns);
        } catch {
          // the cgroup is gone: scan
        }
      }
      return processesInNamespace('pid', ns);
    };
    for (let round = 0; round < 200; round++) {
      const victims = inNamespace().filter((p) => p !== h.pid && (innermostPid(p) ?? 0) > 1);
      if (victims.length === 0) {
        // The dead are reaped by the init; until then they hold their pids against the limit.
        for (let i = 0; i < 100 && zombieChildren(h.pid) > 0; i++) await new Promise((r) => setTimeout(r, 20));
        return killed.size;
      }
      for (const p of victims) {
        try {
          process.kill(p, 'SIGKILL');
          killed.add(p);
        } catch {
          // already gone
        }
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    throw sandboxError('exec_transport', `sandbox ${h.id}: processes kept appearing after 200 rounds of SIGKILL`);
  }

  /**
   * How a sandbox found gone ended, from what only the host holds: its record
   * (gone after a teardown), its cgroup's OOM kills, and the status the mount
   * shell wrote when bwrap returned. The init ignores every signal it could
   * handle and the kernel drops the rest when they come from inside its pid
   * namespace, so an init killed by a signal was killed from the host; one
   * that exited did so because of something inside.
   */
  async lossEvidence(handle: SandboxHandle): Promise<SandboxLossEvidence> {
    const record = this.registry.read(handle.id);
    const dirs = record?.cgroupDirs ?? [];
    const oomKills = dirs.length > 0 ? dirs.reduce<number | null>((n, dir) => {
      const k = cgroupOomKills(dir);
      return k === null ? n : (n ?? 0) + k;
    }, null) : null;
    const exitFile = join(this.registry.stateDir(handle.id), INIT_EXIT_FILE);
    let status: number | null = null;
    // The mount shell writes the status once bwrap has returned, a moment after the init is gone.
    for (let i = 0; i < 100 && record && status === null; i++) {
      try {
        const text = readFileSync(exitFile, 'utf8').trim();
        if (/^\d+$/.test(text)) status = Number(text);
      } catch {
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    const SIGKILLED = 128 + osConstants.signals.SIGKILL;
    const initEnd: SandboxLossEvidence['initEnd'] = status === null ? null : status === SIGKILLED ? { kind: 'signal', signal: 'SIGKILL' } : { kind: 'exit', status };
    return { tornDownByHost: record === undefined, oomKills, initEnd };
  }

  async exec(handle: SandboxHandle, command: string, options: ExecOptions = {}): Promise<ExecResult> {
    const h = this.parseHandle(handle);
    const cwd = options.cwd ?? h.workdir;
    // --norc: stdin is a socket (Node's pipes are socketpairs), which bash takes for rshd/sshd and then sources
    // /etc/bash.bashrc and ~/.bashrc before the command. ~/.bashrc is the agent's to write, so without this it
    // would run first in every later exec, the verifier's reset and tests included.
    const result = await this.run(h, [this.programs.bash, '--norc', '--noprofile', '-c', 'cd -- "$1" || exit 125; eval "$2"', 'bash', cwd, command], {
      env: options.env ?? {},
      ...(options.stdin !== undefined ? { stdin: options.stdin } : {}),
      maxOutputBytes: options.maxOutputBytes ?? this.defaultMaxOutputBytes,
      timeoutMs: options.timeoutMs ?? this.defaultExecTimeoutMs,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.key !== undefined ? { key: options.key } : {}),
    });
    if (!isSameProcess(h.pid, h.pidStartTime)) {
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
    const result = await this.run(h, [this.programs.sh, '-c', 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"', 'rollout-write', path], {
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

  async renewLease(handle: SandboxHandle, leaseMs: number): Promise<void> {
    const record = this.registry.read(handle.id);
    if (!record) throw sandboxError('sandbox_lost', `sandbox ${handle.id} has no record; it was torn down`);
    record.leaseExpiresAt = new Date(Date.now() + leaseMs).toISOString();
    this.registry.write(record);
  }

  /** Records this process as the sandbox's holder when another one (a worker that died) held it. */
  private claim(id: string): void {
    if (this.claimed.has(id)) return;
    try {
      const record = this.registry.read(id);
      if (!record) return;
      if (!record.holder || !isThisProcess(record.holder)) this.registry.write({ ...record, holder: thisProcess() });
      this.claimed.add(id);
    } catch {
      // torn down meanwhile: the command that follows reports it
    }
  }

  /** One readdir of the registry: list() reads and validates every record and checks every init (about 0.1 ms each). */
  async count(): Promise<number> {
    return this.registry.ids().length;
  }

  async list(labels: Record<string, string> = {}): Promise<SandboxRecord[]> {
    const out: SandboxRecord[] = [];
    for (const id of this.registry.ids()) {
      const record = this.registry.read(id);
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

  async teardown(handleOrId: SandboxHandle | string): Promise<TeardownReport> {
    const id = typeof handleOrId === 'string' ? handleOrId : handleOrId.id;
    const report: TeardownReport = { sandboxId: id, existed: false, processesKilled: 0, directoriesRemoved: [], mountsRemoved: [], cgroupsRemoved: [] };
    if (!/^sbx-[a-z0-9-]+$/.test(id)) return report;
    this.claimed.delete(id);
    const stateDir = this.registry.stateDir(id);
    const record = this.registry.read(id);
    const handle = record?.handle ?? (typeof handleOrId === 'string' ? null : LocalSandboxHandleSchema.safeParse(handleOrId).data ?? null);
    let exists = false;
    try {
      exists = statSync(stateDir).isDirectory();
    } catch {
      // already removed
    }
    report.existed = exists || record !== undefined;

    const killed = new Set<number>();
    const cgroupDirs = record?.cgroupDirs ?? [];
    const launcherPid = record?.launcherPid ?? null;
    const mountNamespace = launcherPid ? namespaceOf(launcherPid, 'mnt') : undefined;
    const initAlive = handle !== null && isSameProcess(handle.pid, handle.pidStartTime);
    if (handle && initAlive) {
      // Count what is about to die: the cgroup knows every process, else scan for the pid namespace.
      if (cgroupDirs.length > 0) {
        for (const dir of cgroupDirs) for (const pid of cgroupPids(dir)) killed.add(pid);
      } else {
        const pidNs = namespaceOf(handle.pid, 'pid');
        if (pidNs) for (const pid of processesInNamespace('pid', pidNs)) killed.add(pid);
      }
      killed.add(handle.pid);
      try {
        // Killing pid 1 of a pid namespace kills every process in it.
        process.kill(handle.pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    if (cgroupDirs.length === 0 && (!handle || !initAlive)) {
      // No cgroup and no live init to follow: find the launcher chain by the state directory in its command line.
      for (const pid of this.processesMentioning(stateDir)) {
        killed.add(pid);
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
    }
    // Let the launcher reap the init it watches and leave the private mount namespace on its own...
    let gone = initAlive ? await this.waitUntilGone(handle, launcherPid, mountNamespace) : false;
    // ...then kill whatever the cgroup still holds (a half-provisioned sandbox, a racing exec, a stuck launcher).
    for (const dir of cgroupDirs) for (const pid of cgroupPids(dir)) killed.add(pid);
    await killCgroupProcesses(cgroupDirs);
    if (!gone) gone = await this.waitUntilGone(handle, launcherPid, mountNamespace);
    // A public sandbox's slirp4netns, also where no cgroup held it.
    const network = await detachUserNetwork(stateDir);
    if (network !== undefined) killed.add(network);
    if (!gone) throw new TeardownIncompleteError(`sandbox ${id}: processes did not exit within 2 s of SIGKILL; run teardown again`);
    report.processesKilled = killed.size;
    if (mountNamespace) report.mountsRemoved = [`overlay on ${join(stateDir, 'merged')}`, `tmpfs on ${join(stateDir, 'rw')}`];
    const cgroups = await removeCgroups(cgroupDirs);
    report.cgroupsRemoved = cgroups.removed;
    if (cgroups.busy.length > 0) {
      // Keep the state directory (and its record) so the next teardown, or the reaper, finishes the job.
      throw new TeardownIncompleteError(`sandbox ${id}: cgroups ${cgroups.busy.join(', ')} still busy 5 s after their processes were killed; run teardown again`);
    }
    if (exists) {
      await rm(stateDir, { recursive: true, force: true, maxRetries: 5 });
      report.directoriesRemoved = [stateDir];
    }
    return report;
  }

  /**
   * Waits until the sandbox's init is gone and the launcher, the one process in
   * the private mount namespace, has left it (the overlay unmounts with it).
   */
  private async waitUntilGone(handle: LocalSandboxHandle | null, launcherPid: number | null, mountNamespace: string | undefined): Promise<boolean> {
    for (let i = 0; i < 1000; i++) {
      const initAlive = handle !== null && isSameProcess(handle.pid, handle.pidStartTime);
      const mountsHeld = launcherPid !== null && mountNamespace !== undefined && namespaceOf(launcherPid, 'mnt') === mountNamespace;
      if (!initAlive && !mountsHeld) return true;
      await new Promise((r) => setTimeout(r, 2));
    }
    return false;
  }

  private processesMentioning(stateDir: string): number[] {
    const pids: number[] = [];
    const needle = Buffer.from(`${stateDir}/`);
    for (const entry of readdirSync('/proc')) {
      const pid = Number(entry);
      if (!Number.isInteger(pid) || pid === process.pid) continue;
      try {
        if (readFileSync(`/proc/${pid}/cmdline`).includes(needle)) pids.push(pid);
      } catch {
        // gone meanwhile
      }
    }
    return pids;
  }
}
