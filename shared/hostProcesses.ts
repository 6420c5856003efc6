/**
 * The one walker over this host's /proc: which processes there are, and the fields of their stat
 * line. Every caller that looks for processes (a sandbox's, a build's, a server's backends, a
 * bench's process tree) asks here; a process that ends while it is read simply does not count.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';

const isPid = (entry: string): boolean => /^\d+$/.test(entry);

/** Pids of every process on this host now (/proc's numeric entries). */
export function hostPids(): number[] {
  return readdirSync('/proc').filter(isPid).map(Number);
}

/** Pids of the host's processes for which `test` holds; one that ends (or cannot be read) meanwhile does not count. */
export function pidsWhere(test: (pid: number) => boolean): number[] {
  const pids: number[] = [];
  for (const pid of hostPids()) {
    try {
      if (test(pid)) pids.push(pid);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return pids;
}

/** pidsWhere with an asynchronous test, reading /proc without blocking the event loop. */
export async function pidsWhereAsync(test: (pid: number) => Promise<boolean>): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!isPid(entry)) continue;
    const pid = Number(entry);
    try {
      if (await test(pid)) pids.push(pid);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return pids;
}

/**
 * The fields of /proc/<pid>/stat after the command name, from field 3 (state) on: [0] state,
 * [1] ppid, [2] pgrp, [6] flags, [19] start time. Undefined if the pid is gone.
 */
export function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** The command name of /proc/<pid>/stat (field 2, without its parentheses); undefined if the pid is gone. */
export function commandName(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
  } catch {
    return undefined;
  }
}
