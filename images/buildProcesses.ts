/**
 * Build processes (podman, mmdebstrap, pip, cp) that never outlive the worker
 * that started them. Each runs in a process group of its own under a small
 * guard shell:
 * - the guard gets SIGTERM when the worker dies (PR_SET_PDEATHSIG, set by
 *   util-linux's setpriv) and then SIGKILLs its whole group, the tool and
 *   everything the tool started in it;
 * - the group is recorded under `<cache>/images/running/` with the worker as
 *   its owner (pid, start time, boot id, as a sandbox's holder), and the next
 *   process that builds (or `rollout env`) kills what is left of a group whose
 *   owner is gone: a guard that was SIGKILLed with its worker, or a process
 *   that was between fork and exec then;
 * - a podman build's RUN steps run in containers of their own session (runc
 *   makes them session leaders, reparented to init when runc dies), out of
 *   reach of the group: the build passes `--cgroup-parent` with a name of
 *   its own (buildCgroupParent), recorded too, and whatever is in cgroups
 *   under it is killed with the group (and the empty cgroups removed).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HolderSchema, holderAlive, thisProcess } from '../sandboxes/local/holderProcess.js';
import { processStartTime } from '../sandboxes/local/procfs.js';
import { markStorageForCleaning } from './buildStorage.js';
import { z } from 'zod';
import { pidsWhere, statFields } from '../shared/hostProcesses.js';

const SETPRIV = '/usr/bin/setpriv';
/**
 * fd 3 keeps the guard's stdin for the tool: a non-interactive shell gives an
 * asynchronous command /dev/null otherwise. On SIGTERM the guard kills its group.
 */
const GUARD_SCRIPT = ["trap 'kill -KILL 0' TERM", 'exec 3<&0', '"$@" <&3 3<&- &', 'exec 3<&-', 'wait $!'].join('\n');

const RecordSchema = z.object({ pgid: z.number().int().positive(), startTime: z.string(), owner: HolderSchema, command: z.string(), cgroupParent: z.string().optional() });
type BuildRecord = z.infer<typeof RecordSchema>;

/** argv that runs `file args` under the guard (spawn it detached, so it leads its own process group). */
export function guardedArgv(file: string, args: string[]): [string, string[]] {
  return [SETPRIV, ['--pdeathsig', 'TERM', '--', '/bin/sh', '-c', GUARD_SCRIPT, 'rollout-build-guard', file, ...args]];
}

export function runningDir(cacheDir: string): string {
  return join(cacheDir, 'running');
}

/** A cgroup name for one build's containers (podman build --cgroup-parent). */
export function buildCgroupParent(): string {
  return `/rollout-build-${randomBytes(6).toString('hex')}`;
}

/** Pids of every process in a cgroup under `parent` (any hierarchy). */
function processesUnder(parent: string): number[] {
  // runc puts a container at the parent itself or in a child of it.
  return pidsWhere((pid) => readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n').some((line) => line.endsWith(parent) || line.includes(`${parent}/`)));
}

/** Removes the (empty) cgroup directories named `parent` in every hierarchy, children first. */
function removeCgroupDirs(parent: string): void {
  const name = parent.split('/').pop() ?? '';
  const removeTree = (dir: string): void => {
    for (const child of readdirSync(dir)) {
      const path = `${dir}/${child}`;
      try {
        if (statSync(path).isDirectory()) removeTree(path);
      } catch {
        // gone meanwhile
      }
    }
    rmdirSync(dir);
  };
  const search = (dir: string, depth: number): void => {
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      return;
    }
    for (const entry of entries) {
      const path = `${dir}/${entry}`;
      try {
        if (!statSync(path).isDirectory()) continue;
        if (entry === name) removeTree(path);
        else if (depth > 0) search(path, depth - 1);
      } catch {
        // busy or gone: the next reap tries again
      }
    }
  };
  search('/sys/fs/cgroup', 3);
}

/** Kills every process in cgroups under `parent` and removes those cgroups. */
export async function killBuildCgroup(parent: string): Promise<number> {
  const killed = new Set<number>();
  for (let round = 0; round < 100; round++) {
    const pids = processesUnder(parent);
    if (pids.length === 0) break;
    for (const pid of pids) {
      killed.add(pid);
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  removeCgroupDirs(parent);
  return killed.size;
}

/** Records the group led by `pgid` as this process's; returns the function that forgets it. */
export function recordBuild(cacheDir: string, pgid: number, command: string, cgroupParent?: string): () => void {
  const dir = runningDir(cacheDir);
  const file = join(dir, `${pgid}.json`);
  try {
    mkdirSync(dir, { recursive: true });
    const record: BuildRecord = { pgid, startTime: processStartTime(pgid) ?? '', owner: thisProcess(), command: command.slice(0, 300), ...(cgroupParent ? { cgroupParent } : {}) };
    writeFileSync(file, `${JSON.stringify(record)}\n`);
  } catch {
    // the guard still ends the group with this process; only the next start's check is lost
  }
  return () => rmSync(file, { force: true });
}

/** Pids of every process whose process group is `pgid`. */
export function groupMembers(pgid: number): number[] {
  return pidsWhere((pid) => {
    const fields = statFields(pid);
    return fields !== undefined && Number(fields[2]) === pgid && fields[0] !== 'Z';
  });
}

/**
 * Kills what is left of every recorded build group whose owner no longer runs, and forgets it.
 * A group id stays unused while the group has a member, so the members found are that build's,
 * unless its leader is gone and the pid now leads another group (another start time): left alone.
 */
export async function reapOrphanBuilds(cacheDir: string): Promise<{ groups: number; processes: number }> {
  const dir = runningDir(cacheDir);
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json'));
  } catch {
    return { groups: 0, processes: 0 };
  }
  let groups = 0;
  let processes = 0;
  for (const name of names) {
    const file = join(dir, name);
    let record: BuildRecord;
    try {
      record = RecordSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
    } catch {
      rmSync(file, { force: true });
      continue;
    }
    if (holderAlive(record.owner)) continue;
    // Whatever its processes, a dead build may have left working containers and mounts in podman's storage.
    if (record.command.startsWith('podman')) markStorageForCleaning(cacheDir);
    const leaderStart = processStartTime(record.pgid);
    const members = leaderStart === undefined || leaderStart === record.startTime ? groupMembers(record.pgid) : [];
    if (members.length > 0) {
      groups++;
      processes += members.length;
      try {
        process.kill(-record.pgid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
      for (let i = 0; i < 250 && groupMembers(record.pgid).length > 0; i++) await new Promise((r) => setTimeout(r, 20));
    }
    if (record.cgroupParent) {
      const inCgroups = await killBuildCgroup(record.cgroupParent);
      if (inCgroups > 0 && members.length === 0) groups++;
      processes += inCgroups;
    }
    rmSync(file, { force: true });
  }
  return { groups, processes };
}
