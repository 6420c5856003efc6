/**
 * loadTask for the activities that run many times per rollout: provisioning,
 * every policy step and verification each check that the task is still the
 * version the batch was submitted with. loadTask proves that by hashing every
 * byte of the task (twice for environment/), synchronously, on the worker's
 * event loop: for a task whose environment/ is a repository that is the whole
 * repository read at every turn of every rollout.
 *
 * The cache keeps the loaded task per directory with the tree's metadata
 * fingerprint (path, inode, size, mode, mtime, ctime of every file and
 * directory) and loads again only when the fingerprint changed. A write
 * always moves ctime, but a clock tick of the file system is coarse (a few
 * ms), so two same-size writes inside one tick look alike: as git does with
 * its index ("racy git"), a tree that changed within `settleMs` of being
 * fingerprinted is not cached; it is loaded in full until it has settled.
 */
import { resolve } from 'node:path';
import type { LoadedTask } from '../shared/task.js';
import { treeFingerprint } from '../shared/hashTree.js';
import { loadTask } from './loadTask.js';

export interface TaskCacheOptions {
  /** A tree changed this recently is loaded in full every time (default 2 s). */
  settleMs?: number;
  /** Task directories kept (default 1,000); the least recently used goes first. */
  maxEntries?: number;
}

export interface TaskCacheStats {
  /** Calls answered from the cache (fingerprint only). */
  hits: number;
  /** Calls that read and hashed the whole task. */
  loads: number;
}

export class TaskCache {
  private readonly entries = new Map<string, { fingerprint: string; task: LoadedTask }>();
  private readonly settleMs: number;
  private readonly maxEntries: number;
  private readonly counts: TaskCacheStats = { hits: 0, loads: 0 };

  constructor(options: TaskCacheOptions = {}) {
    this.settleMs = options.settleMs ?? 2000;
    this.maxEntries = options.maxEntries ?? 1000;
  }

  /** The task as loadTask would return it now; the same errors for a missing or invalid one. */
  load(taskDir: string): LoadedTask {
    const dir = resolve(taskDir);
    let fingerprint: { fingerprint: string; newestChangeMs: number };
    try {
      fingerprint = treeFingerprint(dir);
    } catch {
      // Not a readable directory: loadTask names the problem and the fix.
      this.entries.delete(dir);
      this.counts.loads++;
      return loadTask(dir);
    }
    const cached = this.entries.get(dir);
    if (cached && cached.fingerprint === fingerprint.fingerprint) {
      this.counts.hits++;
      this.entries.delete(dir);
      this.entries.set(dir, cached);
      return cached.task;
    }
    this.entries.delete(dir);
    this.counts.loads++;
    const task = loadTask(dir);
    if (Date.now() - fingerprint.newestChangeMs >= this.settleMs) {
      this.entries.set(dir, { fingerprint: fingerprint.fingerprint, task });
      if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    }
    return task;
  }

  stats(): TaskCacheStats {
    return { ...this.counts };
  }
}
