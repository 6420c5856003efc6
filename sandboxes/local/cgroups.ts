/**
 * Per-sandbox cgroups: limits (memory, pids, cpu) and a reliable list of every
 * process to kill at teardown. Works on cgroup v2 (unified) and v1 (one
 * hierarchy per controller); where neither is writable, the caller falls back
 * to rlimits and reports what is not enforced. Asynchronous throughout: it
 * runs on every provision and teardown, on the worker's event loop.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { LimitEnforcement, SandboxLimits } from '../../shared/sandbox.js';

export type CgroupMode = 'v2' | 'v1' | 'none';

export interface CgroupPlacement {
  /** Files a process writes its pid into to join the sandbox's cgroups. */
  procFiles: string[];
  /** Every cgroup directory created, removed at teardown. */
  dirs: string[];
  memory: LimitEnforcement;
  pids: LimitEnforcement;
  cpu: LimitEnforcement;
}

const PARENT = 'rollout-pipeline';
const CPU_PERIOD_US = 100_000;

/** The mode of each root, detected once (two existsSync on the first sandbox, none after). */
const modes = new Map<string, CgroupMode>();
function cgroupMode(root: string): CgroupMode {
  let mode = modes.get(root);
  if (mode === undefined) {
    mode = detectCgroupMode(root);
    modes.set(root, mode);
  }
  return mode;
}

export function detectCgroupMode(root = '/sys/fs/cgroup'): CgroupMode {
  if (existsSync(join(root, 'cgroup.controllers'))) return 'v2';
  if (existsSync(join(root, 'pids', 'cgroup.procs'))) return 'v1';
  return 'none';
}

async function tryWrite(file: string, value: string): Promise<boolean> {
  try {
    await writeFile(file, value);
    return true;
  } catch {
    return false;
  }
}

/** Parents whose controllers were enabled by this process (once per parent, not per sandbox). */
const enabledParents = new Set<string>();

async function createV2(root: string, id: string, limits: SandboxLimits): Promise<CgroupPlacement> {
  const parent = join(root, PARENT);
  const dir = join(parent, id);
  const prepareParent = async (): Promise<void> => {
    await mkdir(parent, { recursive: true });
    // Controllers must be enabled top-down before a child can use them.
    for (const controller of ['memory', 'pids', 'cpu']) {
      await tryWrite(join(root, 'cgroup.subtree_control'), `+${controller}`);
      await tryWrite(join(parent, 'cgroup.subtree_control'), `+${controller}`);
    }
    enabledParents.add(parent);
  };
  if (!enabledParents.has(parent)) await prepareParent();
  try {
    await mkdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    // The parent was removed since (by hand, or a host cleanup): make it again.
    await prepareParent();
    await mkdir(dir);
  }
  const placement: CgroupPlacement = { procFiles: [join(dir, 'cgroup.procs')], dirs: [dir], memory: 'not-requested', pids: 'not-requested', cpu: 'not-requested' };
  if (limits.memoryMb !== undefined) {
    const ok = await tryWrite(join(dir, 'memory.max'), String(limits.memoryMb * 1024 * 1024));
    await tryWrite(join(dir, 'memory.swap.max'), '0');
    placement.memory = ok ? 'cgroup-v2' : 'not-enforced';
  }
  if (limits.pids !== undefined) placement.pids = (await tryWrite(join(dir, 'pids.max'), String(limits.pids))) ? 'cgroup-v2' : 'not-enforced';
  if (limits.cpus !== undefined) {
    placement.cpu = (await tryWrite(join(dir, 'cpu.max'), `${Math.round(limits.cpus * CPU_PERIOD_US)} ${CPU_PERIOD_US}`)) ? 'cgroup-v2' : 'not-enforced';
  }
  return placement;
}

async function createV1(root: string, id: string, limits: SandboxLimits): Promise<CgroupPlacement> {
  const placement: CgroupPlacement = { procFiles: [], dirs: [], memory: 'not-requested', pids: 'not-requested', cpu: 'not-requested' };
  const join1 = async (controller: string): Promise<string | undefined> => {
    const dir = join(root, controller, PARENT, id);
    try {
      await mkdir(dir, { recursive: true });
    } catch {
      return undefined;
    }
    placement.dirs.push(dir);
    placement.procFiles.push(join(dir, 'cgroup.procs'));
    return dir;
  };
  // The pids hierarchy is always joined: it is how teardown finds every process.
  const pidsDir = await join1('pids');
  if (limits.pids !== undefined) {
    placement.pids = pidsDir && (await tryWrite(join(pidsDir, 'pids.max'), String(limits.pids))) ? 'cgroup-v1' : 'not-enforced';
  }
  if (limits.memoryMb !== undefined) {
    const dir = await join1('memory');
    const bytes = String(limits.memoryMb * 1024 * 1024);
    const ok = dir !== undefined && (await tryWrite(join(dir, 'memory.limit_in_bytes'), bytes));
    // Without swap accounting memsw is absent; the plain limit still holds when there is no swap.
    if (ok && dir) await tryWrite(join(dir, 'memory.memsw.limit_in_bytes'), bytes);
    placement.memory = ok ? 'cgroup-v1' : 'not-enforced';
  }
  if (limits.cpus !== undefined) {
    const dir = await join1('cpu');
    const ok =
      dir !== undefined &&
      (await tryWrite(join(dir, 'cpu.cfs_period_us'), String(CPU_PERIOD_US))) &&
      (await tryWrite(join(dir, 'cpu.cfs_quota_us'), String(Math.round(limits.cpus * CPU_PERIOD_US))));
    placement.cpu = ok ? 'cgroup-v1' : 'not-enforced';
  }
  return placement;
}

/** Creates the sandbox's cgroups; returns undefined when this host has no writable cgroup hierarchy. */
export async function createSandboxCgroup(id: string, limits: SandboxLimits, root = '/sys/fs/cgroup'): Promise<CgroupPlacement | undefined> {
  const mode = cgroupMode(root);
  try {
    if (mode === 'v2') return await createV2(root, id, limits);
    if (mode === 'v1') return await createV1(root, id, limits);
  } catch {
    return undefined;
  }
  return undefined;
}

export async function cgroupPids(dir: string): Promise<number[]> {
  try {
    return (await readFile(join(dir, 'cgroup.procs'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** SIGKILLs every process in the cgroups until they are empty; returns how many were killed. */
export async function killCgroupProcesses(dirs: string[]): Promise<number> {
  const killed = new Set<number>();
  for (let round = 0; round < 200; round++) {
    let remaining = 0;
    for (const dir of dirs) {
      if (await tryWrite(join(dir, 'cgroup.kill'), '1')) {
        for (const pid of await cgroupPids(dir)) killed.add(pid);
      }
      for (const pid of await cgroupPids(dir)) {
        remaining++;
        killed.add(pid);
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    if (remaining === 0) return killed.size;
    await new Promise((r) => setTimeout(r, 5));
  }
  return killed.size;
}

/**
 * Removes the cgroup directories. A directory stays busy while a dead member
 * waits to be reaped (a zombie whose parent is slow); after `timeoutMs` the
 * ones still there are returned in `busy` so teardown can fail and be retried.
 */
export async function removeCgroups(dirs: string[], timeoutMs = 5_000): Promise<{ removed: string[]; busy: string[] }> {
  const removed: string[] = [];
  const busy: string[] = [];
  const deadline = Date.now() + timeoutMs;
  for (const dir of dirs) {
    for (;;) {
      try {
        await rmdir(dir);
        removed.push(dir);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') break;
        if (Date.now() > deadline) {
          busy.push(dir);
          break;
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  }
  return { removed, busy };
}

/** Processes the cgroup's memory limit killed (v2 memory.events, v1 memory.oom_control); null when the cgroup has no such file. */
export async function cgroupOomKills(dir: string): Promise<number | null> {
  for (const file of ['memory.events', 'memory.oom_control']) {
    try {
      const match = /^oom_kill (\d+)$/m.exec(await readFile(join(dir, file), 'utf8'));
      if (match) return Number(match[1]);
    } catch {
      // not this hierarchy's file
    }
  }
  return null;
}
