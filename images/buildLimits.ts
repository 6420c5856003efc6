/**
 * The project's caps on a task image build, whatever the task asks for: a Dockerfile is
 * third-party code, and its build runs on a worker's host beside other work.
 * - time: the task's [environment] build_timeout_sec (600 s when unset), never past
 *   ROLLOUT_BUILD_TIMEOUT_MAX_SEC (default 3600 s);
 * - memory: ROLLOUT_BUILD_MEMORY_MB (default 8192) for all of a build's RUN steps together;
 * - processes: ROLLOUT_BUILD_PIDS_MAX (default 4096), the same.
 * Memory and processes are limits on the build's own cgroup (the --cgroup-parent its RUN
 * containers are made under, buildProcesses.ts), in the v1 memory and pids hierarchies or the
 * v2 tree; what hit them is read back from that cgroup's counters for the error message.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClassifiedError } from '../shared/failures.js';
import type { LoadedTask } from '../shared/task.js';

const CGROUP_ROOT = '/sys/fs/cgroup';
export const DEFAULT_BUILD_TIMEOUT_SEC = 600;
const DEFAULTS = { ROLLOUT_BUILD_TIMEOUT_MAX_SEC: 3600, ROLLOUT_BUILD_MEMORY_MB: 8192, ROLLOUT_BUILD_PIDS_MAX: 4096 } as const;
type CapName = keyof typeof DEFAULTS;

export interface BuildLimits {
  timeoutSec: number;
  /** Set when the task asked for longer than the project allows. */
  timeoutCappedFrom?: number;
  timeoutMaxSec: number;
  memoryMb: number;
  pids: number;
}

function cap(env: NodeJS.ProcessEnv, name: CapName): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return DEFAULTS[name];
  if (!/^\d+$/.test(raw.trim()) || Number(raw) <= 0) {
    throw new ClassifiedError(
      'infra',
      'capability_missing',
      `${name} = ${JSON.stringify(raw)} is not a positive whole number; unset it for the default (${DEFAULTS[name]}) or set e.g. ${name}=${DEFAULTS[name]}`,
    );
  }
  return Number(raw);
}

/** The caps of this task's build on this worker (a bad cap is refused by name before anything is built). */
export function buildLimits(task: LoadedTask, env: NodeJS.ProcessEnv = process.env): BuildLimits {
  const timeoutMaxSec = cap(env, 'ROLLOUT_BUILD_TIMEOUT_MAX_SEC');
  const asked = task.config.environment.build_timeout_sec ?? DEFAULT_BUILD_TIMEOUT_SEC;
  return {
    timeoutSec: Math.min(asked, timeoutMaxSec),
    ...(asked > timeoutMaxSec ? { timeoutCappedFrom: asked } : {}),
    timeoutMaxSec,
    memoryMb: cap(env, 'ROLLOUT_BUILD_MEMORY_MB'),
    pids: cap(env, 'ROLLOUT_BUILD_PIDS_MAX'),
  };
}

/**
 * The cgroup a build's RUN containers are made in: a child of the one that holds the caps. runc
 * removes a container's own cgroup when the container ends (every RUN step), so limits written
 * there would be gone by the next step; the parent keeps them for all steps (limits are
 * hierarchical in both cgroup versions).
 */
export function runCgroup(parent: string): string {
  return `${parent}/run`;
}

/** What the build's log says of its caps. */
export function describeLimits(limits: BuildLimits): string {
  const time =
    limits.timeoutCappedFrom !== undefined
      ? `${limits.timeoutSec} s (the task's build_timeout_sec = ${limits.timeoutCappedFrom} is capped by ROLLOUT_BUILD_TIMEOUT_MAX_SEC)`
      : `${limits.timeoutSec} s`;
  return `time ${time}, memory ${limits.memoryMb} MiB, processes ${limits.pids}`;
}

/** Why a timed-out build stopped, in the user's terms. */
export function timeoutReason(limits: BuildLimits): string {
  return limits.timeoutCappedFrom !== undefined
    ? `ran past ${limits.timeoutSec} s: the task's build_timeout_sec = ${limits.timeoutCappedFrom} is capped by ROLLOUT_BUILD_TIMEOUT_MAX_SEC = ${limits.timeoutMaxSec}`
    : `ran past [environment] build_timeout_sec = ${limits.timeoutSec}`;
}

const v2 = (): boolean => existsSync(join(CGROUP_ROOT, 'cgroup.controllers'));
const dirsOf = (parent: string): { memory: string; pids: string } =>
  v2() ? { memory: join(CGROUP_ROOT, parent), pids: join(CGROUP_ROOT, parent) } : { memory: join(CGROUP_ROOT, 'memory', parent), pids: join(CGROUP_ROOT, 'pids', parent) };

function write(file: string, value: string): boolean {
  try {
    writeFileSync(file, value);
    return true;
  } catch {
    return false;
  }
}

/**
 * Makes the build's cgroup (the --cgroup-parent of its RUN containers) with the caps, before the
 * build starts. Returns what could not be enforced here (no writable cgroup), for the build's log.
 */
export function limitBuildCgroup(parent: string, limits: BuildLimits): string[] {
  const dirs = dirsOf(parent);
  const bytes = String(limits.memoryMb * 1024 * 1024);
  const missing: string[] = [];
  try {
    mkdirSync(dirs.memory, { recursive: true });
    mkdirSync(dirs.pids, { recursive: true });
  } catch (err) {
    return [`no writable cgroup for the build's caps (${(err as Error).message}): memory and processes not enforced`];
  }
  if (v2()) {
    for (const controller of ['memory', 'pids']) write(join(CGROUP_ROOT, 'cgroup.subtree_control'), `+${controller}`);
    if (!write(join(dirs.memory, 'memory.max'), bytes)) missing.push('memory');
    write(join(dirs.memory, 'memory.swap.max'), '0');
  } else {
    if (!write(join(dirs.memory, 'memory.limit_in_bytes'), bytes)) missing.push('memory');
    write(join(dirs.memory, 'memory.memsw.limit_in_bytes'), bytes); // absent without swap accounting
  }
  if (!write(join(dirs.pids, 'pids.max'), String(limits.pids))) missing.push('processes');
  return missing.length > 0 ? [`${missing.join(' and ')} not enforced: cannot write the build cgroup's limits`] : [];
}

function counter(file: string, name: string): number {
  try {
    const line = readFileSync(file, 'utf8').split('\n').find((l) => l.startsWith(`${name} `));
    return line ? Number(line.split(' ')[1]) || 0 : 0;
  } catch {
    return 0;
  }
}

/** What the build's cgroup counted: read before it is removed. */
export interface CapReadings {
  /** v2: OOM kills in the subtree. v1 counts them only in the step's own cgroup, gone by then. */
  oomKills: number;
  /** Usage reached the memory cap (v1: the build cgroup's high-water mark, memory.max_usage_in_bytes). */
  memoryAtCap: boolean;
  /** The process count reached the cap (pids.peak, or v2's hierarchical pids.events max). */
  pidsAtCap: boolean;
}

export function readCaps(parent: string, limits: BuildLimits): CapReadings {
  const dirs = dirsOf(parent);
  const number = (file: string): number => {
    try {
      return Number(readFileSync(file, 'utf8').trim()) || 0;
    } catch {
      return 0;
    }
  };
  if (v2()) {
    return {
      oomKills: counter(join(dirs.memory, 'memory.events'), 'oom_kill'),
      memoryAtCap: counter(join(dirs.memory, 'memory.events'), 'max') > 0,
      pidsAtCap: counter(join(dirs.pids, 'pids.events'), 'max') > 0 || number(join(dirs.pids, 'pids.peak')) >= limits.pids,
    };
  }
  // The high-water mark: failcnt stays 0 here when the memory+swap limit (set equal) is the one hit.
  const peak = Math.max(number(join(dirs.memory, 'memory.max_usage_in_bytes')), number(join(dirs.memory, 'memory.memsw.max_usage_in_bytes')));
  return { oomKills: 0, memoryAtCap: peak >= limits.memoryMb * 1024 * 1024, pidsAtCap: number(join(dirs.pids, 'pids.peak')) >= limits.pids };
}

/**
 * Which caps a failed build hit, in the user's terms: the sentences that go into its error. A
 * step killed (exit 137, or "Killed" in its output) while memory stood at the cap ran out of
 * memory; a build whose processes reached the cap could not start more.
 */
export function capsHit(readings: CapReadings, limits: BuildLimits, build: { code: number; tail: string }): string[] {
  const hit: string[] = [];
  const killed = build.code === 137 || /(^|\n)Killed\b|exit status 137|signal: killed/.test(build.tail);
  if (readings.oomKills > 0 || (readings.memoryAtCap && killed)) hit.push(`a RUN step ran out of memory: the build's cap is ${limits.memoryMb} MiB (ROLLOUT_BUILD_MEMORY_MB)`);
  if (readings.pidsAtCap) hit.push(`a RUN step could not start a process: the build's cap is ${limits.pids} processes (ROLLOUT_BUILD_PIDS_MAX = ${limits.pids})`);
  return hit;
}
