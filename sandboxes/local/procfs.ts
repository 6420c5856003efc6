/**
 * What the host's /proc says about processes: identity (pid + start time, to
 * tell a live sandbox from a recycled pid) and namespace membership (to find
 * every process of a sandbox, wherever it was started from).
 */
import { readFileSync, readlinkSync } from 'node:fs';
import { pidsWhere, statFields } from '../../shared/hostProcesses.js';

/**
 * Field 22 of /proc/<pid>/stat: start time in clock ticks since boot; undefined
 * if the pid is gone or a zombie (dead, waiting only to be reaped by its parent).
 */
export function processStartTime(pid: number): string | undefined {
  const fields = statFields(pid);
  if (!fields || fields[0] === 'Z' || fields[0] === 'X') return undefined;
  return fields[19];
}

export function isSameProcess(pid: number, startTime: string): boolean {
  return processStartTime(pid) === startTime;
}

/** PF_EXITING in the flags of /proc/<pid>/stat (field 9): the kernel has begun to tear the process down. */
const PF_EXITING = 0x4;

/**
 * True while `pid` (the one started at `startTime`) still runs and has not begun to exit. A killed
 * pid-namespace init closes its files first, then waits for every process of its namespace to die
 * before it becomes a zombie: in between, its start time still reads as alive, but it is dying.
 */
export function isLiveProcess(pid: number, startTime: string): boolean {
  const fields = statFields(pid);
  if (!fields || fields[0] === 'Z' || fields[0] === 'X' || fields[19] !== startTime) return false;
  return (Number(fields[6]) & PF_EXITING) === 0;
}

/** The inode of a namespace link such as /proc/<pid>/ns/pid, e.g. "pid:[4026532181]". */
export function namespaceOf(pid: number, kind: 'pid' | 'mnt' | 'net'): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/${kind}`);
  } catch {
    return undefined;
  }
}

/** Host pids of every process whose namespace of `kind` is `namespace`. */
export function processesInNamespace(kind: 'pid' | 'mnt' | 'net', namespace: string): number[] {
  return pidsWhere((pid) => namespaceOf(pid, kind) === namespace);
}

/** The pid a process has inside its own (innermost) pid namespace, from /proc/<pid>/status NSpid. */
export function innermostPid(pid: number): number | undefined {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('NSpid:'));
    const last = line?.trim().split(/\s+/).at(-1);
    return last === undefined ? undefined : Number(last);
  } catch {
    return undefined;
  }
}
