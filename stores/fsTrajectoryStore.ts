/**
 * The filesystem trajectory store (the default on one machine): one JSON file
 * per key under a root directory, written atomically (temp file + rename).
 * A finished rollout is `<ref>/rollout.json`; queries scan the directories
 * (fine for one machine; the PostgreSQL store indexes them).
 */
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join, normalize } from 'node:path';
import { ClassifiedError } from '../shared/failures.js';
import { compareRolloutRecords, type RolloutQuery, type RolloutRecord, type TrajectoryStore } from './trajectoryStore.js';

const ROLLOUT_RECORD = 'rollout.json';

export class FsTrajectoryStore implements TrajectoryStore {
  constructor(readonly root: string) {}

  private path(ref: string, name: string): string {
    const rel = normalize(join(ref, name));
    if (rel.startsWith('..') || rel.startsWith('/')) throw new Error(`trajectory key escapes the store: ${ref}/${name}`);
    return join(this.root, rel);
  }

  locate(ref: string): string {
    return this.path(ref, '');
  }

  async put(ref: string, name: string, value: unknown): Promise<void> {
    const file = this.path(ref, name);
    const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    try {
      const text = JSON.stringify(value, null, 1);
      // The folder exists for all but an attempt's first record: a recursive mkdir per put was the store's
      // largest cost in a worker CPU profile (one mkdir per path component), so make it only when missing.
      await writeFile(tmp, text).catch(async (err: unknown) => {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        await mkdir(dirname(file), { recursive: true });
        await writeFile(tmp, text);
      });
      await rename(tmp, file);
    } catch (err) {
      throw new ClassifiedError('infra', 'storage_error', `trajectory store: cannot write ${file}: ${(err as Error).message}`, { cause: err });
    }
  }

  async get<T>(ref: string, name: string): Promise<T | undefined> {
    const file = this.path(ref, name);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new ClassifiedError('infra', 'storage_error', `trajectory store: cannot read ${file}: ${(err as Error).message}`, { cause: err });
    }
    return JSON.parse(text) as T;
  }

  async list(ref: string, prefix = ''): Promise<string[]> {
    const dir = this.path(ref, dirname(`${prefix}x`));
    const base = prefix.slice(prefix.lastIndexOf('/') + 1);
    const sub = prefix.slice(0, prefix.lastIndexOf('/') + 1);
    try {
      return (await readdir(dir))
        .filter((n) => n.startsWith(base) && n.endsWith('.json'))
        .sort()
        .map((n) => `${sub}${n}`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new ClassifiedError('infra', 'storage_error', `trajectory store: cannot list ${dir}: ${(err as Error).message}`, { cause: err });
    }
  }

  async putRollout(record: RolloutRecord): Promise<void> {
    await this.put(record.result.trajectoryRef, ROLLOUT_RECORD, record);
  }

  async queryRollouts(query: RolloutQuery): Promise<RolloutRecord[]> {
    const names = async (dir: string): Promise<string[]> => {
      try {
        return (await readdir(dir, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw new ClassifiedError('infra', 'storage_error', `trajectory store: cannot list ${dir}: ${(err as Error).message}`, { cause: err });
      }
    };
    for (const value of [query.batchId, query.taskId]) {
      if (value !== undefined && (value.includes('/') || value.startsWith('.'))) throw new Error(`not a batch or task id: ${JSON.stringify(value)}`);
    }
    const out: RolloutRecord[] = [];
    for (const batch of query.batchId !== undefined ? [query.batchId] : await names(this.root)) {
      for (const task of query.taskId !== undefined ? [query.taskId] : await names(join(this.root, batch))) {
        for (const index of await names(join(this.root, batch, task))) {
          const record = await this.get<RolloutRecord>(`${batch}/${task}/${index}`, ROLLOUT_RECORD);
          if (record && (query.outcomeClass === undefined || record.result.outcomeClass === query.outcomeClass)) out.push(record);
        }
      }
    }
    return out.sort(compareRolloutRecords);
  }

  async close(): Promise<void> {
    // nothing to release
  }
}
