/**
 * The filesystem trajectory store (the default on one machine): one JSON file
 * per key under a root directory, written atomically (temp file + rename).
 */
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join, normalize } from 'node:path';
import { ClassifiedError } from '../../shared/failures.js';
import type { TrajectoryStore } from './trajectoryStore.js';

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
      await mkdir(dirname(file), { recursive: true });
      await writeFile(tmp, JSON.stringify(value, null, 1));
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
}
