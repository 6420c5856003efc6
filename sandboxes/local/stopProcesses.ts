/**
 * Kills, from the host, every process of a live sandbox but its init (the
 * verifier's first step, so it works even when a fork bomb leaves no pid to
 * start one more process inside).
 */
import { readFile } from 'node:fs/promises';
import type { LocalSandboxHandle } from '../../shared/sandbox.js';
import { sandboxError, sleep } from './localSandboxContext.js';
import { innermostPid, namespaceOf, processesInNamespace } from './procfs.js';

/** How many children of `pid` are zombies (dead, not yet reaped). */
async function zombieChildren(pid: number): Promise<number> {
  let children: string[];
  try {
    children = (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8')).trim().split(/\s+/).filter(Boolean);
  } catch {
    return 0;
  }
  let zombies = 0;
  for (const c of children) {
    try {
      if (/^\d+ \(.*\) Z /s.test(await readFile(`/proc/${c}/stat`, 'utf8'))) zombies++;
    } catch {
      // reaped meanwhile
    }
  }
  return zombies;
}

/**
 * Host pids of the processes in the sandbox's pid namespace. The sandbox's cgroup lists its processes
 * (every exec joins it first); a scan of all of /proc costs a readlink per process on the host, which
 * at 1,000 sandboxes alive made each verify O(host processes). Its members include the exec machinery
 * still outside the pid namespace (the entry program's parent): only those inside are kept.
 */
async function processesOf(h: LocalSandboxHandle, ns: string): Promise<number[]> {
  const procs = h.cgroupProcFiles[0];
  if (procs !== undefined) {
    try {
      return (await readFile(procs, 'utf8')).split('\n').filter(Boolean).map(Number).filter((p) => namespaceOf(p, 'pid') === ns);
    } catch {
      // the cgroup is gone: scan
    }
  }
  return processesInNamespace('pid', ns);
}

/** How many processes the agent left running in the sandbox (every one but its init). */
export async function lingeringProcesses(h: LocalSandboxHandle): Promise<number> {
  const ns = namespaceOf(h.pid, 'pid');
  if (!ns) throw sandboxError('sandbox_lost', `sandbox ${h.id} is gone: no pid namespace for its init ${h.pid}`);
  return (await processesOf(h, ns)).filter((p) => p !== h.pid && (innermostPid(p) ?? 0) > 1).length;
}

export async function stopSandboxProcesses(h: LocalSandboxHandle): Promise<number> {
  const ns = namespaceOf(h.pid, 'pid');
  if (!ns) throw sandboxError('sandbox_lost', `sandbox ${h.id} is gone: no pid namespace for its init ${h.pid}`);
  const killed = new Set<number>();
  const inNamespace = (): Promise<number[]> => processesOf(h, ns);
  for (let round = 0; round < 200; round++) {
    const victims = (await inNamespace()).filter((p) => p !== h.pid && (innermostPid(p) ?? 0) > 1);
    if (victims.length === 0) {
      // The dead are reaped by the init; until then they hold their pids against the limit.
      for (let i = 0; i < 100 && (await zombieChildren(h.pid)) > 0; i++) await sleep(20);
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
    await sleep(20);
  }
  throw sandboxError('exec_transport', `sandbox ${h.id}: processes kept appearing after 200 rounds of SIGKILL`);
}
