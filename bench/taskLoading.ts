/**
 * Section 5: what checking a task's version costs each activity call that
 * does it (provisioning, every policy step, verification), by the size of the
 * task's environment/: loadTask (reads and hashes every byte, on the worker's
 * event loop) against the activities' TaskCache (stats every file, reads
 * nothing) in the same run. The small row is the bench task of sections 2-4;
 * the larger ones stand for a task whose starting files are a repository.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadTask } from '../tasks/loadTask.js';
import { TaskCache } from '../tasks/taskCache.js';
import { summarize, type Summary } from '../shared/stats.js';
import { formatTable } from './stats.js';
import { createBenchTask, TURNS } from './workload.js';

export interface TaskLoadingRow {
  files: number;
  megabytes: number;
  loadTask: Summary;
  cached: Summary;
  ratio: number;
  /** Per rollout of the bench workload: provision + TURNS policy steps + verify. */
  perRolloutMs: { loadTask: number; cached: number };
}

export interface TaskLoadingResult {
  calls: number;
  rows: TaskLoadingRow[];
}

/** A bench task whose environment/ holds `files` files of `bytesPerFile` random bytes in directories of 100. */
function taskWithEnvironment(root: string, files: number, bytesPerFile: number): string {
  const dir = createBenchTask(root, `task-${files}`);
  for (let i = 0; i < files; i++) {
    const sub = join(dir, 'environment', 'src', `d${Math.floor(i / 100)}`);
    if (i % 100 === 0) mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, `f${i}.py`), randomBytes(bytesPerFile));
  }
  return dir;
}

const time = (f: () => unknown): number => {
  const started = performance.now();
  f();
  return performance.now() - started;
};

export async function runTaskLoading(options: { scratch: string; sizes: { files: number; bytesPerFile: number }[]; calls: number }): Promise<TaskLoadingResult> {
  const rows: TaskLoadingRow[] = [];
  for (const size of options.sizes) {
    const dir = taskWithEnvironment(join(options.scratch, 'task-loading'), size.files, size.bytesPerFile);
    // Past the cache's settle time, as a submitted task is by its second activity.
    await new Promise((r) => setTimeout(r, 2100));
    loadTask(dir); // page cache warm for both
    const full = Array.from({ length: options.calls }, () => time(() => loadTask(dir)));
    const cache = new TaskCache();
    cache.load(dir);
    const cached = Array.from({ length: options.calls }, () => time(() => cache.load(dir)));
    if (cache.stats().loads !== 1) throw new Error(`task cache reloaded an unchanged task: ${JSON.stringify(cache.stats())}`);
    const a = summarize(full);
    const b = summarize(cached);
    const callsPerRollout = TURNS + 2;
    rows.push({
      files: size.files,
      megabytes: (size.files * size.bytesPerFile) / 1024 ** 2,
      loadTask: a,
      cached: b,
      ratio: a.p50 / b.p50,
      perRolloutMs: { loadTask: a.mean * callsPerRollout, cached: b.mean * callsPerRollout },
    });
  }
  return { calls: options.calls, rows };
}

const f2 = (n: number): string => n.toFixed(2);

export function formatTaskLoading(r: TaskLoadingResult): string {
  return [
    `task version check per activity call (${r.calls} calls each, page cache warm); per rollout = provision + ${TURNS} policy steps + verify`,
    formatTable(
      ['environment/', 'loadTask p50 ms', 'p95', 'cached p50 ms', 'p95', 'loadTask / cached', 'per rollout: loadTask ms', 'cached ms'],
      r.rows.map((x) => [
        `${x.files} files, ${x.megabytes.toFixed(1)} MiB`,
        f2(x.loadTask.p50),
        f2(x.loadTask.p95),
        f2(x.cached.p50),
        f2(x.cached.p95),
        `${x.ratio.toFixed(0)} x`,
        f2(x.perRolloutMs.loadTask),
        f2(x.perRolloutMs.cached),
      ]),
    ),
  ].join('\n');
}
