/**
 * Provision stage of a local sandbox: record on disk -> cgroup -> private
 * mount namespace with tmpfs + overlay -> bwrap -> pid 1 inside reports
 * ready. The overlay lives only in that private namespace, so it disappears
 * with the sandbox and never shows on the host.
 *
 * With the compiled helper the launcher is one program (`helper launch`);
 * without it, the chain `sh` (join cgroups) -> `prlimit` -> `unshare --mount`
 * -> `sh` (mount script) -> `bwrap`. Either way the launcher stays bwrap's
 * parent for the sandbox's life and writes how it ended to init-exit.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ClassifiedError } from '../../shared/failures.js';
import type { EnforcedLimits, LocalSandboxHandle, ProvisionResult, ResolvedSandboxSpec } from '../../shared/sandbox.js';
import { bwrapArgs } from './bwrapArgs.js';
import { createDiskLayer } from './diskLayer.js';
import { createSandboxCgroup, type CgroupPlacement } from './cgroups.js';
import { helperLaunchArgv } from './helper/execHelper.js';
import { thisProcess } from './holderProcess.js';
import { errorText, readTail, sandboxError, type LocalSandboxContext } from './localSandboxContext.js';
import { processStartTime } from './procfs.js';
import type { StoredRecord } from './sandboxRegistry.js';
import { EXEC_SOCKET_FILE, INIT_EXIT_FILE, JOIN_CGROUP_SCRIPT, MOUNT_SCRIPT, SANDBOX_PATH } from './sandboxScripts.js';
import { LauncherExited } from './sandboxSpawner.js';
import { attachUserNetwork } from './userNetwork.js';

/** Checks the spec's lower layer: an absolute path overlayfs can take, and a directory. */
export async function checkLowerLayer(spec: ResolvedSandboxSpec): Promise<string> {
  const lower = spec.rootfs ?? spec.environmentDir;
  const field = spec.rootfs ? 'rootfs' : 'environmentDir';
  if (!lower.startsWith('/') || /[,:\n]/.test(lower)) {
    throw new ClassifiedError('task', 'invalid_spec', `sandbox spec: ${field} ${JSON.stringify(lower)} must be an absolute path without ',' ':' or newlines (overlayfs cannot take them)`);
  }
  let isDir = false;
  try {
    isDir = (await stat(lower)).isDirectory();
  } catch {
    // reported below
  }
  if (!isDir) {
    const fix = spec.rootfs ? 'build the task image again (rollout env build)' : "create it (an empty one is fine) or fix the task's environment/ path";
    throw new ClassifiedError('task', 'invalid_spec', `sandbox spec: ${field} ${lower} is not a directory; ${fix}`);
  }
  return lower;
}

/**
 * Writes the record of a new sandbox (and makes its state directory with `dirs` in it) before anything
 * is launched, so a crash from here on leaves something teardown and the reaper find.
 */
export async function writeNewRecord(ctx: LocalSandboxContext, id: string, spec: ResolvedSandboxSpec, dirs: string[], extra: Partial<StoredRecord> = {}): Promise<StoredRecord> {
  const stateDir = ctx.registry.stateDir(id);
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
    spec,
    ...extra,
  };
  try {
    await mkdir(stateDir, { recursive: true });
    for (const dir of dirs) await mkdir(join(stateDir, dir));
    await ctx.registry.write(record);
    ctx.claimed.add(id);
  } catch (err) {
    // The host's disk is full (or the state root unwritable): nothing of this sandbox may stay behind.
    await rm(stateDir, { recursive: true, force: true });
    throw sandboxError('provision_failed', `local sandbox ${id}: cannot write its state under ${ctx.registry.root} on this host: ${errorText(err)}`, err);
  }
  return record;
}

/**
 * Provisions one sandbox for a checked spec. On any failure after its record
 * is written, `teardown` removes what was made before the error is thrown.
 */
export async function provisionSandbox(ctx: LocalSandboxContext, spec: ResolvedSandboxSpec, teardown: (id: string) => Promise<unknown>): Promise<ProvisionResult> {
  const id = `sbx-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
  const record = await writeNewRecord(ctx, id, spec, ['rw', 'merged']);
  const { stateDir } = record;
  const diskMb = spec.limits.diskMb ?? ctx.defaultDiskMb;
  try {
    // An image sandbox's writable layer on disk (as Docker's) unless the host says tmpfs: its loop device, mounted by the launcher.
    const layerDevice = spec.rootfs && ctx.writableLayer === 'disk' ? await createDiskLayer(stateDir, diskMb) : undefined;
    return await launch(ctx, spec, id, stateDir, record, {
      argv: async (cgroup, memoryRlimitBytes, execSocket) =>
        launcherArgv(
          ctx,
          cgroup,
          memoryRlimitBytes,
          spec,
          stateDir,
          layerDevice ?? `${diskMb}m`,
          execSocket,
          await bwrapArgs(spec, stateDir, diskMb, ctx.etcDir, ctx.programs, execSocket !== null),
        ),
      diskLayer: layerDevice !== undefined,
      userNetwork: spec.network === 'public',
    });
  } catch (err) {
    await teardown(id).catch(() => undefined);
    if (err instanceof ClassifiedError) throw err;
    throw sandboxError('provision_failed', `local sandbox ${id}: ${errorText(err)}`, err);
  }
}

/** A unix socket's path must fit sockaddr_un's 108 bytes, its NUL included. */
const MAX_SOCKET_PATH_BYTES = 107;
/**
 * Where the sandbox's exec server listens (helper/sandbox-init.c), or null when its init is the bash keeper: no
 * compiled helper, or a state path too long for a unix socket. (No spec can keep sys_ptrace or
 * sys_admin, the capabilities that would reach a non-dumpable init: the schema allows nine others.)
 */
export function execServerSocket(ctx: LocalSandboxContext, stateDir: string): string | null {
  if (!ctx.helper) return null;
  const path = join(stateDir, EXEC_SOCKET_FILE);
  return Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES ? null : path;
}

/** `layer`: the writable layer, a tmpfs size (`1024m`) or the loop device of its file on disk (`/dev/loop3`). */
function launcherArgv(
  ctx: LocalSandboxContext,
  cgroup: CgroupPlacement | undefined,
  memoryRlimitBytes: number | null,
  spec: ResolvedSandboxSpec,
  stateDir: string,
  layer: string,
  execSocket: string | null,
  bwrap: string[],
): string[] {
  const lower = spec.rootfs ?? spec.environmentDir;
  if (ctx.helper) {
    return helperLaunchArgv(
      ctx.helper,
      {
        cgroupProcFiles: cgroup?.procFiles ?? [],
        memoryRlimitBytes,
        rwDir: join(stateDir, 'rw'),
        mergedDir: join(stateDir, 'merged'),
        exitFile: join(stateDir, INIT_EXIT_FILE),
        lower,
        size: layer,
        execSocket,
      },
      [ctx.programs.bwrap, ...bwrap],
    );
  }
  return [
    ...(cgroup && cgroup.procFiles.length > 0 ? [ctx.programs.sh, '-c', JOIN_CGROUP_SCRIPT, 'rollout-join-cgroup'] : []),
    ...(memoryRlimitBytes !== null ? [ctx.programs.prlimit, `--as=${memoryRlimitBytes}`, '--'] : []),
    ctx.programs.unshare,
    '--mount',
    '--propagation',
    'private',
    '--',
    ctx.programs.sh,
    '-c',
    MOUNT_SCRIPT,
    'rollout-sandbox-mount',
    stateDir,
    lower,
    layer,
    ctx.programs.bwrap,
    ...bwrap,
  ];
}

/** How one sandbox is launched: the launcher's argv, given where its cgroups and exec socket are; and whether slirp4netns connects it. */
export interface LaunchPlan {
  argv(cgroup: CgroupPlacement | undefined, memoryRlimitBytes: number | null, execSocket: string | null): Promise<string[]>;
  userNetwork: boolean;
  /** The writable layer is a file on disk (diskLayer.ts), not a tmpfs: how the disk limit is enforced. */
  diskLayer?: boolean;
}

/** Cgroups, the launcher, its ready report, the handle: what every local sandbox goes through once its record is on disk. */
export async function launch(ctx: LocalSandboxContext, spec: ResolvedSandboxSpec, id: string, stateDir: string, record: StoredRecord, plan: LaunchPlan): Promise<ProvisionResult> {
  const cgroup = await createSandboxCgroup(id, spec.limits, ctx.cgroupRoot);
  record.cgroupDirs = cgroup?.dirs ?? [];
  // Written before anything joins the cgroups, so a teardown after a crash here finds them.
  const recordWritten = ctx.registry.write(record);
  const enforcedLimits: EnforcedLimits = {
    memory: cgroup?.memory ?? (spec.limits.memoryMb === undefined ? 'not-requested' : 'rlimit'),
    // RLIMIT_NPROC counts every process of the uid host-wide: useless for root, so not claimed.
    pids: cgroup?.pids ?? (spec.limits.pids === undefined ? 'not-requested' : 'not-enforced'),
    cpu: cgroup?.cpu ?? (spec.limits.cpus === undefined ? 'not-requested' : 'not-enforced'),
    disk: plan.diskLayer ? 'ext4-file-size' : 'tmpfs-size',
  };
  const memoryRlimitBytes = enforcedLimits.memory === 'rlimit' && spec.limits.memoryMb !== undefined ? spec.limits.memoryMb * 1024 * 1024 : null;
  const execSocket = execServerSocket(ctx, stateDir);
  const argv = await plan.argv(cgroup, memoryRlimitBytes, execSocket);
  await recordWritten;

  const logFile = join(stateDir, 'launch.log');
  const launcher = ctx.spawner.launch({
    launch: true,
    file: argv[0] as string,
    args: argv.slice(1),
    env: { PATH: SANDBOX_PATH, ...(ctx.helper ? {} : { ROLLOUT_CGROUP_PROCS: cgroup?.procFiles.join(' ') ?? '' }) },
    logFile,
  });
  try {
    record.launcherPid = await launcher.started;
  } catch (err) {
    throw sandboxError('provision_failed', `local sandbox ${id}: cannot start ${argv[0]}: ${errorText(err)}`, err);
  }
  // The launcher's pid is on disk while bwrap starts; the handle is written once the sandbox is up.
  const launcherWritten = ctx.registry.write(record);

  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      void readTail(logFile).then((tail) => reject(sandboxError('provision_timeout', `local sandbox ${id} did not come up within ${ctx.provisionTimeoutMs} ms; launcher log: ${tail || '(empty)'}`)));
    }, ctx.provisionTimeoutMs);
  });
  let infoText: string;
  try {
    infoText = await Promise.race([launcher.launched, timedOut]);
  } catch (err) {
    if (err instanceof LauncherExited) {
      throw sandboxError('provision_failed', `local sandbox ${id}: ${err.message} before the sandbox was up: ${(await readTail(logFile)) || '(no output)'}`);
    }
    if (err instanceof ClassifiedError) throw err;
    throw sandboxError('provision_failed', `local sandbox ${id}: ${errorText(err)}`, err);
  } finally {
    clearTimeout(timer);
    await launcherWritten.catch(() => undefined);
  }
  const childPid = (JSON.parse(infoText) as { 'child-pid'?: number })['child-pid'];
  if (typeof childPid !== 'number') throw sandboxError('provision_failed', `local sandbox ${id}: bwrap reported no child pid (${infoText})`);
  const pidStartTime = processStartTime(childPid);
  if (pidStartTime === undefined) throw sandboxError('provision_failed', `local sandbox ${id}: its init (pid ${childPid}) died at start; ${await readTail(logFile)}`);

  const handle: LocalSandboxHandle = {
    provider: 'local',
    id,
    host: ctx.host,
    pid: childPid,
    pidStartTime,
    workdir: spec.workdir,
    stateDir,
    cgroupProcFiles: cgroup?.procFiles ?? [],
    memoryRlimitBytes,
    ...(Object.keys(spec.env).length > 0 ? { env: spec.env } : {}),
    ...(spec.fileCapabilities.length > 0 ? { capabilities: spec.fileCapabilities } : {}),
    ...(execSocket !== null ? { execSocket } : {}),
  };
  if (plan.userNetwork) {
    const prefix = cgroup && cgroup.procFiles.length > 0 ? [ctx.programs.sh, '-c', JOIN_CGROUP_SCRIPT, 'rollout-join-cgroup'] : [];
    await attachUserNetwork({ initPid: childPid, stateDir, prefix, env: { PATH: SANDBOX_PATH, ROLLOUT_CGROUP_PROCS: cgroup?.procFiles.join(' ') ?? '' }, nsenter: ctx.programs.nsenter });
  }
  record.handle = handle;
  await ctx.registry.write(record);
  return { handle, enforcedLimits };
}
