/**
 * Each test file's wall and CPU time from the last run on this machine, kept outside the repository
 * (the cache directory, as every other per-machine artefact), so the next run schedules longest first
 * and weighs files by what they really used. A file run with a name filter is not recorded.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { rolloutCacheDir } from '../../shared/cacheDir.js';

export interface FileTiming {
  wallS: number;
  cpuS: number;
  /** ISO time of the run that measured it. */
  at: string;
}

export type TimingTable = Record<string, FileTiming>;

export function timingsFile(env: NodeJS.ProcessEnv = process.env): string {
  return join(rolloutCacheDir(env), 'test-timings.json');
}

export function readTimings(path: string): TimingTable {
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
    if (!parsed || typeof parsed !== 'object') return {};
    const table: TimingTable = {};
    for (const [file, t] of Object.entries(parsed as Record<string, unknown>)) {
      const v = t as Partial<FileTiming> | null;
      if (v && typeof v.wallS === 'number' && typeof v.cpuS === 'number') table[file] = { wallS: v.wallS, cpuS: v.cpuS, at: String(v.at ?? '') };
    }
    return table;
  } catch {
    return {};
  }
}

/** Merges the new measurements into the table on disk (atomically: a rename). */
export function writeTimings(path: string, measured: TimingTable): void {
  const table = { ...readTimings(path), ...measured };
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(table, null, 1)}\n`);
  renameSync(tmp, path);
}
