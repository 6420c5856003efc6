/**
 * CPU time per component, from cgroup v1 `cpuacct` accounting: one cgroup per component under a
 * directory of this run (`<cpuacct mount><our own cgroup>/rollout-bench-<pid>/<component>`), each
 * component's processes moved in (or started inside, `joinPrefix`), and `cpuacct.usage` (ns, every
 * process that ever ran there, the exited ones included) read before and after. Processes forked
 * later inherit their parent's cgroup, so a PostgreSQL backend started mid-run is charged to
 * PostgreSQL and a sandbox command to the worker host that spawned it.
 *
 * Where cpuacct is mounted is read from /proc/mounts (here `/sys/fs/cgroup/cpuacct`, on other v1
 * hosts often `/sys/fs/cgroup/cpu,cpuacct`). `destroy()` moves whatever is still inside back where
 * this process was and removes the directories; `create()` first removes the empty directories of
 * an earlier run whose process is gone (a bench killed with SIGKILL).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { hostPids, statFields } from '../shared/hostProcesses.js';

export class CgroupCpuError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CgroupCpuError';
  }
}

const PREFIX = 'rollout-bench-';

/** The mount point of the cgroup v1 hierarchy that has the cpuacct controller, or undefined. */
export function cpuacctMount(mounts = readFileSync('/proc/mounts', 'utf8')): string | undefined {
  for (const line of mounts.split('\n')) {
    const [, dir, type, options] = line.split(' ');
    if (type === 'cgroup' && dir && (options ?? '').split(',').includes('cpuacct')) return dir;
  }
  return undefined;
}

/** The cpuacct cgroup `pid` is in, relative to the mount (`/` at the root). */
function cgroupOf(pid: number | 'self'): string {
  for (const line of readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n')) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
    if (controllers?.split(',').includes('cpuacct') && path !== undefined) return path;
  }
  return '/';
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** `pid` and every live descendant, from the parent pids in /proc. */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const p of hostPids()) {
    const fields = statFields(p);
    if (!fields) continue;
    const ppid = Number(fields[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), p]);
  }
  const out: number[] = [];
  const stack = [pid];
  while (stack.length > 0) {
    const p = stack.pop() as number;
    out.push(p);
    stack.push(...(children.get(p) ?? []));
  }
  return out;
}

export class CgroupCpu {
  private readonly groups = new Map<string, string>();

  private constructor(
    /** Where this process was: everything goes back there at the end. */
    private readonly home: string,
    readonly root: string,
  ) {}

  /** A directory of this run under our own cpuacct cgroup; a clear error where there is none to write. */
  static create(): CgroupCpu {
    const mount = cpuacctMount();
    if (!mount) {
      throw new CgroupCpuError(
        'the cluster section reads CPU per component from cgroup v1 cpuacct accounting, and no cgroup hierarchy with the cpuacct controller is mounted (see /proc/mounts); mount one (mount -t cgroup -o cpuacct cgroup /sys/fs/cgroup/cpuacct) or run it on a host with cgroup v1',
      );
    }
    const home = join(mount, cgroupOf('self'));
    for (const stale of readdirSync(home).filter((n) => n.startsWith(PREFIX))) {
      if (alive(Number(stale.slice(PREFIX.length)))) continue;
      const dir = join(home, stale);
      try {
        for (const sub of readdirSync(dir, { withFileTypes: true })) if (sub.isDirectory()) rmdirSync(join(dir, sub.name));
        rmdirSync(dir);
      } catch {
        // still holds a process: leave it
      }
    }
    const root = join(home, `${PREFIX}${process.pid}`);
    try {
      mkdirSync(root);
    } catch (err) {
      throw new CgroupCpuError(`cannot create the cgroup ${root} (${err instanceof Error ? err.message : String(err)}): the cluster section needs root and a writable cpuacct hierarchy`);
    }
    return new CgroupCpu(home, root);
  }

  /** The cgroup of `name`, made on first use. */
  group(name: string): string {
    let dir = this.groups.get(name);
    if (!dir) {
      dir = join(this.root, name.replace(/[^A-Za-z0-9_.-]/g, '_'));
      mkdirSync(dir, { recursive: true });
      this.groups.set(name, dir);
    }
    return dir;
  }

  /** Moves `pid` and, with `tree`, every live descendant into the cgroup of `name`. */
  add(name: string, pid: number, options: { tree?: boolean } = {}): void {
    const procs = join(this.group(name), 'cgroup.procs');
    for (const p of options.tree ? processTree(pid) : [pid]) {
      try {
        writeFileSync(procs, String(p));
      } catch {
        // exited meanwhile
      }
    }
  }

  /** A command prefix that starts the command inside the cgroup of `name` (same pid: sh execs it). */
  joinPrefix(name: string): string[] {
    return ['sh', '-c', 'echo $$ > "$0" && exec "$@"', join(this.group(name), 'cgroup.procs')];
  }

  /** cpuacct.usage of every group, in ms. */
  usageMs(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [name, dir] of this.groups) out[name] = Number(readFileSync(join(dir, 'cpuacct.usage'), 'utf8').trim()) / 1e6;
    return out;
  }

  /** Moves every process still inside back to where this process was, and removes the cgroups. */
  destroy(): void {
    const homeProcs = join(this.home, 'cgroup.procs');
    for (const dir of [...this.groups.values(), this.root]) {
      if (!existsSync(dir)) continue;
      for (let tries = 0; tries < 20; tries++) {
        const pids = readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
        if (pids.length === 0) break;
        for (const p of pids) {
          try {
            writeFileSync(homeProcs, p);
          } catch {
            // exited meanwhile
          }
        }
      }
    }
    for (const dir of [...this.groups.values(), this.root]) {
      try {
        if (existsSync(dir)) rmdirSync(dir);
      } catch {
        // a process forked into it during the move: one more pass
        for (const p of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) writeFileSync(homeProcs, p);
        rmdirSync(dir);
      }
    }
    this.groups.clear();
  }
}
