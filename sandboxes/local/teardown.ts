/**
 * Teardown stage of a local sandbox: SIGKILL pid 1 (the kernel kills the
 * whole pid namespace), kill whatever the cgroup still holds, wait until the
 * launcher has left the private mount namespace (the overlay goes with it),
 * remove the cgroups and the state directory. Idempotent and safe to run
 * concurrently; when it cannot finish it throws TeardownIncompleteError and
 * keeps the record, so a retry or the reaper completes it.
 */
import { readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { LocalSandboxHandleSchema, type LocalSandboxHandle, type SandboxHandle, type TeardownReport } from '../../shared/sandbox.js';
import { cgroupPids, killCgroupProcesses, removeCgroups } from './cgroups.js';
import { releaseDiskLayer } from './diskLayer.js';
import { sleep, TeardownIncompleteError, type LocalSandboxContext } from './localSandboxContext.js';
import { isSameProcess, namespaceOf, processesInNamespace } from './procfs.js';
import { besidePrefix, removeScratch } from './besideSandbox.js';
import { SANDBOX_ID } from './sandboxRegistry.js';
import { detachUserNetwork } from './userNetwork.js';
import { pidsWhereAsync } from '../../shared/hostProcesses.js';

export async function teardownSandbox(ctx: LocalSandboxContext, handleOrId: SandboxHandle | string): Promise<TeardownReport> {
  const id = typeof handleOrId === 'string' ? handleOrId : handleOrId.id;
  const report: TeardownReport = { sandboxId: id, existed: false, processesKilled: 0, directoriesRemoved: [], mountsRemoved: [], cgroupsRemoved: [] };
  if (!SANDBOX_ID.test(id)) return report;
  ctx.claimed.delete(id);
  const stateDir = ctx.registry.stateDir(id);
  // A verifier's sandbox beside this one holds a copy of its mounts and shares its network: it goes first.
  for (const beside of (await ctx.registry.listIds()).filter((other) => other.startsWith(besidePrefix(id)))) await teardownSandbox(ctx, beside);
  const record = await ctx.registry.get(id);
  const handle = record?.handle ?? (typeof handleOrId === 'string' ? null : LocalSandboxHandleSchema.safeParse(handleOrId).data ?? null);
  let exists = false;
  try {
    exists = (await stat(stateDir)).isDirectory();
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
      for (const dir of cgroupDirs) for (const pid of await cgroupPids(dir)) killed.add(pid);
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
    for (const pid of await processesMentioning(stateDir)) {
      killed.add(pid);
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
  }
  // Let the launcher reap the init it watches and leave the private mount namespace on its own...
  let gone = initAlive ? await waitUntilGone(handle, launcherPid, mountNamespace) : false;
  // ...then kill whatever the cgroup still holds (a half-provisioned sandbox, a racing exec, a stuck launcher).
  for (const dir of cgroupDirs) for (const pid of await cgroupPids(dir)) killed.add(pid);
  await killCgroupProcesses(cgroupDirs);
  if (!gone) gone = await waitUntilGone(handle, launcherPid, mountNamespace);
  // A public sandbox's slirp4netns, also where no cgroup held it.
  const network = await detachUserNetwork(stateDir);
  if (network !== undefined) killed.add(network);
  if (!gone) throw new TeardownIncompleteError(`sandbox ${id}: processes did not exit within 2 s of SIGKILL; run teardown again`);
  report.processesKilled = killed.size;
  // A sandbox beside another mounted nothing of its own there (its namespace held only a copy of the other's).
  // The layer's file on disk, if it has one: its loop device is detached once the mount namespace is gone.
  const devices = await releaseDiskLayer(stateDir);
  if (mountNamespace && record?.beside === undefined)
    report.mountsRemoved = [
      `overlay on ${join(stateDir, 'merged')}`,
      `${devices.length > 0 ? `ext4 (${devices.join(', ')})` : 'tmpfs'} on ${join(stateDir, 'rw')}`,
    ];
  const cgroups = await removeCgroups(cgroupDirs);
  report.cgroupsRemoved = cgroups.removed;
  if (cgroups.busy.length > 0) {
    // Keep the state directory (and its record) so the next teardown, or the reaper, finishes the job.
    throw new TeardownIncompleteError(`sandbox ${id}: cgroups ${cgroups.busy.join(', ')} still busy 5 s after their processes were killed; run teardown again`);
  }
  if (record?.beside !== undefined) {
    // Its own /tmp, /root, /tests and /logs on the first sandbox's disk layer, if it had them there.
    const first = await ctx.registry.get(record.beside);
    if (first?.handle && isSameProcess(first.handle.pid, first.handle.pidStartTime)) await removeScratch(first.stateDir, first.launcherPid, id);
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
async function waitUntilGone(handle: LocalSandboxHandle | null, launcherPid: number | null, mountNamespace: string | undefined): Promise<boolean> {
  for (let i = 0; i < 1000; i++) {
    const initAlive = handle !== null && isSameProcess(handle.pid, handle.pidStartTime);
    const mountsHeld = launcherPid !== null && mountNamespace !== undefined && namespaceOf(launcherPid, 'mnt') === mountNamespace;
    if (!initAlive && !mountsHeld) return true;
    await sleep(2);
  }
  return false;
}

async function processesMentioning(stateDir: string): Promise<number[]> {
  const needle = Buffer.from(`${stateDir}/`);
  return pidsWhereAsync(async (pid) => pid !== process.pid && (await readFile(`/proc/${pid}/cmdline`)).includes(needle));
}
