/**
 * Host-side view of local sandboxes for tests: which processes, mounts (in any
 * mount namespace on the host), directories and cgroups of a sandbox remain.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Leftovers } from '../conformance/sandboxConformance.js';
import { localHandle, type SandboxHandle } from '../../shared/sandbox.js';
import { isSameProcess, namespaceOf, processesInNamespace } from '../../sandboxes/local/procfs.js';
import { NETWORK_PID_FILE } from '../../sandboxes/local/userNetwork.js';

function allPids(): number[] {
  return readdirSync('/proc')
    .map(Number)
    .filter((n) => Number.isInteger(n) && n !== process.pid);
}

/** Every mount line, across all mount namespaces on the host, that mentions `needle`. */
export function mountsMentioning(needle: string): string[] {
  const seen = new Set<string>();
  const found: string[] = [];
  for (const pid of allPids()) {
    const ns = namespaceOf(pid, 'mnt');
    if (!ns || seen.has(ns)) continue;
    seen.add(ns);
    try {
      for (const line of readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n')) {
        if (line.includes(needle)) found.push(`${ns} ${line}`);
      }
    } catch {
      // process gone
    }
  }
  return found;
}

export function processesMentioning(needle: string): number[] {
  const bytes = Buffer.from(needle);
  return allPids().filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`).includes(bytes);
    } catch {
      return false;
    }
  });
}

export class LocalSandboxInspector {
  private readonly pidNamespaces = new Map<string, string>();
  /** A public sandbox's slirp4netns (pid, start time), which lives outside the sandbox's namespaces. */
  private readonly networkProcesses = new Map<string, [number, string]>();

  track(sandbox: SandboxHandle): void {
    const handle = localHandle(sandbox);
    const ns = namespaceOf(handle.pid, 'pid');
    if (ns) this.pidNamespaces.set(handle.id, ns);
    try {
      const [pid = '', start = ''] = readFileSync(join(handle.stateDir, NETWORK_PID_FILE), 'utf8').trim().split(' ');
      this.networkProcesses.set(handle.id, [Number(pid), start]);
    } catch {
      // no network of its own
    }
  }

  async leftovers(sandbox: SandboxHandle): Promise<Leftovers> {
    const handle = localHandle(sandbox);
    // The kernel reuses a freed namespace's inode: once the sandbox's init is gone (and with it, by the
    // pid namespace's rules, every process in it), what that inode names now is another process's.
    const ns = isSameProcess(handle.pid, handle.pidStartTime) ? this.pidNamespaces.get(handle.id) : undefined;
    const processes = new Set([...processesMentioning(handle.stateDir), ...(ns ? processesInNamespace('pid', ns) : [])]);
    const network = this.networkProcesses.get(handle.id);
    if (network && isSameProcess(...network)) processes.add(network[0]);
    return {
      processes: [...processes],
      mounts: mountsMentioning(handle.id),
      directories: existsSync(handle.stateDir) ? [handle.stateDir] : [],
      other: [...handle.cgroupProcFiles.map((f) => dirname(f)).filter((d) => existsSync(d)), ...loopDevicesBackedBy(handle.stateDir)],
    };
  }
}

/** Loop devices whose backing file is (or was, deleted) under the sandbox's state directory: a writable layer on disk left attached. */
export function loopDevicesBackedBy(stateDir: string): string[] {
  const listed = spawnSync('losetup', ['--list', '--noheadings', '--output', 'NAME,BACK-FILE'], { encoding: 'utf8', env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } }).stdout ?? '';
  return listed
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter(([, file]) => file !== undefined && file.startsWith(`${stateDir}/`))
    .map(([name, file]) => `loop device ${name} on ${file}`);
}
