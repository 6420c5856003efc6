/**
 * A sandbox beside a live one: what the in-place verifier runs its tests in, so that
 * the processes the agent left running (a server the tests call) keep running, as
 * under Harbor, without reaching the tests.
 *
 * It shares the first sandbox's root filesystem as it is now (its overlay: the tests
 * read what the agent made, and see the files a live service still writes) and its
 * network namespace (the service answers on the loopback). It has a pid namespace of
 * its own, a sibling of the first one's, so neither side sees the other's processes
 * (no /proc/<pid>/root into the verifier's mounts, nothing to signal or ptrace), its
 * own mount namespace with fresh /tests, /logs, /tmp and /root (an image sandbox's
 * are in its root filesystem; the agent keeps its copies and never sees these), and
 * cgroups of its own with the task's limits, so what the agent left running does not
 * eat the verifier's memory or pids.
 *
 * It is launched in a copy of the first launcher's private mount namespace (where the
 * overlay is mounted) joined to the first init's network namespace: `helper beside`,
 * or nsenter + unshare + a shell without the helper. Its id starts with the first
 * one's, and tearing the first one down takes it along.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ClassifiedError } from '../../shared/failures.js';
import type { LocalSandboxHandle, ProvisionResult, ResolvedSandboxSpec } from '../../shared/sandbox.js';
import { BESIDE_DIR_MODES, BESIDE_DIRS, bwrapArgs } from './bwrapArgs.js';
import { DISK_LAYER_FILE } from './diskLayer.js';
import { helperBesideArgv } from './helper/execHelper.js';
import { errorText, sandboxError, type LocalSandboxContext } from './localSandboxContext.js';
import { isLiveProcess, processStartTime } from './procfs.js';
import { launch, writeNewRecord } from './provision.js';
import { BESIDE_SCRIPT, INIT_EXIT_FILE, JOIN_CGROUP_SCRIPT } from './sandboxScripts.js';

/** The ids of the sandboxes beside `id` start with this. */
export const besidePrefix = (id: string): string => `${id}-beside-`;

export async function provisionBeside(ctx: LocalSandboxContext, of: LocalSandboxHandle, labels: Record<string, string>, teardown: (id: string) => Promise<unknown>): Promise<ProvisionResult> {
  const first = await ctx.registry.get(of.id);
  if (!first?.handle || first.launcherPid === null || !isLiveProcess(of.pid, of.pidStartTime)) {
    throw sandboxError('sandbox_lost', `sandbox ${of.id} is gone: nothing to launch a sandbox beside`);
  }
  if (!first.spec) {
    throw sandboxError(
      'provision_failed',
      `sandbox ${of.id} was provisioned by an older worker that did not record its spec; a sandbox beside it cannot be built (verify it clean-room, or tear it down and run the rollout again)`,
    );
  }
  const launcherStart = processStartTime(first.launcherPid);
  if (launcherStart === undefined) throw sandboxError('sandbox_lost', `sandbox ${of.id} is gone: its launcher (pid ${first.launcherPid}) no longer runs`);

  const spec: ResolvedSandboxSpec = { ...first.spec, owner: first.owner, labels: { ...first.labels, ...labels } };
  const id = `${besidePrefix(of.id)}${randomBytes(3).toString('hex')}`;
  const record = await writeNewRecord(ctx, id, spec, [], { beside: of.id });
  const exitFile = join(record.stateDir, INIT_EXIT_FILE);
  const diskMb = spec.limits.diskMb ?? ctx.defaultDiskMb;
  try {
    // The first sandbox's writable layer on disk: the verifier's own directories go there too (not in its overlay).
    const scratch = spec.rootfs && existsSync(join(first.stateDir, DISK_LAYER_FILE)) ? await makeScratch(first.stateDir, first.launcherPid, id) : null;
    return await launch(ctx, spec, id, record.stateDir, record, {
      argv: async (cgroup, memoryRlimitBytes, execSocket) => {
        // Built against the first sandbox's state directory: its overlay is what the copy of its mount namespace shows there.
        const bwrap = [ctx.programs.bwrap, ...(await bwrapArgs(spec, first.stateDir, diskMb, ctx.etcDir, ctx.programs, execSocket !== null, { scratch }))];
        if (ctx.helper) {
          return helperBesideArgv(
            ctx.helper,
            {
              cgroupProcFiles: cgroup?.procFiles ?? [],
              memoryRlimitBytes,
              mountOf: { pid: first.launcherPid as number, pidStartTime: launcherStart },
              networkOf: { pid: of.pid, pidStartTime: of.pidStartTime },
              exitFile,
              execSocket,
            },
            bwrap,
          );
        }
        return [
          ...(cgroup && cgroup.procFiles.length > 0 ? [ctx.programs.sh, '-c', JOIN_CGROUP_SCRIPT, 'rollout-join-cgroup'] : []),
          ...(memoryRlimitBytes !== null ? [ctx.programs.prlimit, `--as=${memoryRlimitBytes}`, '--'] : []),
          ctx.programs.nsenter, `--mount=/proc/${first.launcherPid}/ns/mnt`, `--net=/proc/${of.pid}/ns/net`, '--',
          ctx.programs.unshare, '--mount', '--propagation', 'private', '--',
          ctx.programs.sh, '-c', BESIDE_SCRIPT, 'rollout-sandbox-beside', exitFile,
          ...bwrap,
        ];
      },
      // Its network is the first sandbox's (slirp4netns already serves it where that one is public).
      userNetwork: false,
    });
  } catch (err) {
    await teardown(id).catch(() => undefined);
    if (err instanceof ClassifiedError) throw err;
    throw sandboxError('provision_failed', `local sandbox ${id} beside ${of.id}: ${errorText(err)}`, err);
  }
}

/** Where a sandbox beside `firstStateDir`'s keeps its own directories on that one's disk layer (a path in its launcher's namespace). */
export function besideScratch(firstStateDir: string, id: string): string {
  return join(firstStateDir, 'rw', 'beside', id);
}

/** Makes the scratch directories, from the host through the first launcher's mount namespace (where the layer is mounted). */
async function makeScratch(firstStateDir: string, launcherPid: number, id: string): Promise<string> {
  const scratch = besideScratch(firstStateDir, id);
  const fromHost = `/proc/${launcherPid}/root${scratch}`;
  for (const dir of BESIDE_DIRS) {
    await mkdir(join(fromHost, dir), { recursive: true });
    await chmod(join(fromHost, dir), BESIDE_DIR_MODES[dir]);
  }
  return scratch;
}

/** Removes a torn-down beside sandbox's scratch from the first one's layer (gone with it if that one is gone). */
export async function removeScratch(firstStateDir: string, launcherPid: number | null, id: string): Promise<void> {
  if (launcherPid === null) return;
  await rm(`/proc/${launcherPid}/root${besideScratch(firstStateDir, id)}`, { recursive: true, force: true }).catch(() => undefined);
}
