/**
 * Per-sandbox cgroups: limits (memory, pids, cpu) and a reliable list of every
 * process to kill at teardown. Works on cgroup v2 (unified) and v1 (one
 * hierarchy per controller); where neither is writable, the caller falls back
 * to rlimits and reports what is not enforced.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LimitEnforcement, SandboxLimits } from '../../../shared/sandbox.js';

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

export function detectCgroupMode(root = '/sys/fs/cgroup'): CgroupMode {
  if (existsSync(join(root, 'cgroup.controllers'))) return 'v2';
  if (existsSync(join(root, 'pids', 'cgroup.procs'))) return 'v1';
  return 'none';
}

function tryWrite(file: string, value: string): boolean {
  try {
    writeFileSync(file, value);
    return true;
  } catch {
    return false;
  }
}

function createV2(root: string, id: string, limits: SandboxLimits): CgroupPlacement {
  const parent = join(root, PARENT);
  mkdirSync(parent, { recursive: true });
  // Controllers must be enabled top-down before a child can use them.
  for (const controller of ['memory', 'pids', 'cpu']) {
    tryWrite(join(root, 'cgroup.subtree_control'), `+${controller}`);
    tryWrite(join(parent, 'cgroup.subtree_control'), `+${controller}`);
  }
  const dir = join(parent, id);
  mkdirSync(dir);
  const placement: CgroupPlacement = { procFiles: [join(dir, 'cgroup.procs')], dirs: [dir], memory: 'not-requested', pids: 'not-requested', cpu: 'not-requested' };
  if (limits.memoryMb !== undefined) {
    const ok = tryWrite(join(dir, 'memory.max'), String(limits.memoryMb * 1024 * 1024));
    tryWrite(join(dir, 'memory.swap.max'), '0');
    placement.memory = ok ? 'cgroup-v2' : 'not-enforced';
  }
  if (limits.pids !== undefined) placement.pids = tryWrite(join(dir, 'pids.max'), String(limits.pids)) ? 'cgroup-v2' : 'not-enforced';
  if (limits.cpus !== undefined) {
    placement.cpu = tryWrite(join(dir, 'cpu.max'), `${Math.round(limits.cpus * CPU_PERIOD_US)} ${CPU_PERIOD_US}`) ? 'cgroup-v2' : 'not-enforced';
  }
  return placement;
}

function createV1(root: string, id: string, limits: SandboxLimits): CgroupPlacement {
  const placement: CgroupPlacement = { procFiles: [], dirs: [], memory: 'not-requested', pids: 'not-requested', cpu: 'not-requested' };
  const join1 = (controller: string): string | undefined => {
    const dir = join(root, controller, PARENT, id);
    try {
      mkdirSync(dir, { recursive: true });
    } catch {
      return undefined;
    }
    placement.dirs.push(dir);
    placement.procFiles.push(join(dir, 'cgroup.procs'));
    return dir;
  };
  // The pids hierarchy is always joined: it is how teardown finds every process.
  const pidsDir = join1('pids');
  if (limits.pids !== undefined) {
    placement.pids = pidsDir && tryWrite(join(pidsDir, 'pids.max'), String(limits.pids)) ? 'cgroup-v1' : 'not-enforced';
  }
  if (limits.memoryMb !== undefined) {
    const dir = join1('memory');
    const bytes = String(limits.memoryMb * 1024 * 1024);
    const ok = dir !== undefined && tryWrite(join(dir, 'memory.limit_in_bytes'), bytes);
    // Without swap accounting memsw is absent; the plain limit still holds when there is no swap.
    if (ok && dir) tryWrite(join(dir, 'memory.memsw.limit_in_bytes'), bytes);
    placement.memory = ok ? 'cgroup-v1' : 'not-enforced';
  }
  if (limits.cpus !== undefined) {
    const dir = join1('cpu');
    const ok =
      dir !== undefined &&
      tryWrite(join(dir, 'cpu.cfs_period_us'), String(CPU_PERIOD_US)) &&
      tryWrite(join(dir, 'cpu.cfs_quota_us'), String(Math.round(limits.cpus * CPU_PERIOD_US)));
    placement.cpu = ok ? 'cgroup-v1' : 'not-enforced';
  }
  return placement;
}

/** Creates the sandbox's cgroups; returns undefined when this host has no writable cgroup hierarchy. */
export function createSandboxCgroup(id: string, limits: SandboxLimits, root = '/sys/fs/cgroup'): CgroupPlacement | undefined {
  const mode = detectCgroupMode(root);
  try {
    if (mode === 'v2') return createV2(root, id, limits);
    if (mode === 'v1') return createV1(root, id, limits);
  } catch {
    return undefined;
  }
  return undefined;
}

export function cgroupPids(dir: string): number[] {
  try {
    return readFileSync(join(dir, 'cgroup.procs'), 'utf8')
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
      if (tryWrite(join(dir, 'cgroup.kill'), '1')) {
        for (const pid of cgroupPids(dir)) killed.add(pid);
      }
      for (const pid of cgroupPids(dir)) {
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
        rmdirSync(dir);
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
export function cgroupOomKills(dir: string): number | null {
  for (const file of ['memory.events', 'memory.oom_control']) {
    try {
      const match = /^oom_kill (\d+)$/m.exec(readFileSync(join(dir, file), 'utf8'));
      if (match) return Number(match[1]);
    } catch {
      // not this hierarchy's file
    }
  }
  return null;
}
