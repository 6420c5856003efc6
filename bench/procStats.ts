/**
 * What /proc says about the processes a benchmark runs: memory (RSS, its
 * high-water mark, PSS), CPU time (a process and the children it reaped),
 * and the sandboxes' processes, found by pid namespace in one pass.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { loadavg } from 'node:os';
import { commandName, hostPids, pidsWhere, statFields } from '../shared/hostProcesses.js';

let ticksPerSecond: number | undefined;
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

export function memAvailableKb(): number {
  const line = readFileSync('/proc/meminfo', 'utf8').split('\n').find((l) => l.startsWith('MemAvailable:'));
  return Number(line?.split(/\s+/)[1] ?? 0);
}

export function pssKb(pid: number): number {
  try {
    const line = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').split('\n').find((l) => l.startsWith('Pss:'));
    return Number(line?.split(/\s+/)[1] ?? 0);
  } catch {
    return 0;
  }
}

/** VmRSS and VmHWM (peak RSS over the process's life) in KiB; zeros when the process is gone. */
export function processMemoryKb(pid: number | 'self'): { rssKb: number; hwmKb: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
    return { rssKb: field('VmRSS'), hwmKb: field('VmHWM') };
  } catch {
    return { rssKb: 0, hwmKb: 0 };
  }
}

export interface CpuTimes {
  /** The process's own user + system time. */
  selfMs: number;
  /** User + system time of the children it has waited for (sandbox commands, launchers). */
  childrenMs: number;
}

/** CPU time from /proc/<pid>/stat (utime, stime, cutime, cstime); zeros when the process is gone. */
export function processCpu(pid: number | 'self'): CpuTimes {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
    // After the command name: state is field 3, so utime (14) is index 11.
    const tick = 1000 / clockTicks();
    return { selfMs: ((f[11] ?? 0) + (f[12] ?? 0)) * tick, childrenMs: ((f[13] ?? 0) + (f[14] ?? 0)) * tick };
  } catch {
    return { selfMs: 0, childrenMs: 0 };
  }
}

/**
 * CPU of a process and everything it started: its own time as selfMs; as
 * childrenMs the children it reaped plus, for every live descendant (the
 * spawn broker, sandbox launchers), that process's own and reaped time. The
 * sandbox commands the spawn broker starts are its children, not the
 * worker's, so the worker's cutime alone would miss them.
 */
export function processTreeCpu(pid: number | 'self'): CpuTimes {
  const root = pid === 'self' ? process.pid : pid;
  const children = new Map<number, number[]>();
  for (const p of hostPids()) {
    const fields = statFields(p);
    // tsx's esbuild service is a child of every TypeScript process here; it is not the pipeline's work.
    if (!fields || commandName(p) === 'esbuild') continue;
    const ppid = Number(fields[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), p]);
  }
  const own = processCpu(root);
  let childrenMs = own.childrenMs;
  const stack = [...(children.get(root) ?? [])];
  while (stack.length > 0) {
    const p = stack.pop() as number;
    const t = processCpu(p);
    childrenMs += t.selfMs + t.childrenMs;
    stack.push(...(children.get(p) ?? []));
  }
  return { selfMs: own.selfMs, childrenMs };
}

export function cpuDelta(after: CpuTimes, before: CpuTimes): CpuTimes {
  return { selfMs: after.selfMs - before.selfMs, childrenMs: after.childrenMs - before.childrenMs };
}

export function loadAverages(): [number, number, number] {
  const [one, five, fifteen] = loadavg();
  return [round2(one ?? 0), round2(five ?? 0), round2(fifteen ?? 0)];
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

function parentPid(pid: number): number | undefined {
  try {
    const m = /^PPid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

export interface SandboxMemory {
  /** Sandboxes whose init was still there. */
  sandboxes: number;
  /** Processes inside their pid namespaces (the idle init alone for an idle sandbox). */
  processes: number;
  /** PSS of those processes, summed. */
  pssKb: number;
  /** PSS of the bwrap process outside each namespace that waits for it, summed. */
  launcherPssKb: number;
}

/**
 * Memory of the sandboxes whose init (pid 1 inside, a host pid here) is given:
 * every process in their pid namespaces, found in one pass over /proc.
 */
export function sandboxProcessMemory(initPids: number[]): SandboxMemory {
  const wanted = new Map<string, number>();
  for (const pid of initPids) {
    try {
      wanted.set(readlinkSync(`/proc/${pid}/ns/pid`), pid);
    } catch {
      // gone
    }
  }
  let processes = 0;
  let pss = 0;
  for (const pid of pidsWhere((p) => wanted.has(readlinkSync(`/proc/${p}/ns/pid`)))) {
    processes++;
    pss += pssKb(pid);
  }
  let launcher = 0;
  for (const init of wanted.values()) {
    const parent = parentPid(init);
    if (parent !== undefined && parent > 1) launcher += pssKb(parent);
  }
  return { sandboxes: wanted.size, processes, pssKb: pss, launcherPssKb: launcher };
}

/** Jiffies the whole machine spent busy and in total (the `cpu` line of /proc/stat). */
export function machineCpu(): { busy: number; total: number } {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}

/** Share of the machine's CPU time that was busy between two readings of machineCpu(). */
export function busyShare(after: { busy: number; total: number }, before: { busy: number; total: number }): number {
  return (after.busy - before.busy) / Math.max(1, after.total - before.total);
}
