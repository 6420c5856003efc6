/**
 * Content hashes of task files: sha256 over every file under a directory,
 * in sorted path order, covering each relative path, its executable bit and
 * its bytes. Two checkouts of the same task hash the same; any edit changes it.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

export function listFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) out.push(path);
    }
  };
  walk(root);
  return out;
}

export function hashTree(root: string): string {
  const hash = createHash('sha256');
  for (const file of listFiles(root)) {
    const executable = (statSync(file).mode & 0o111) !== 0;
    hash.update(`${relative(root, file)}\0${executable ? 'x' : '-'}\0`);
    hash.update(readFileSync(file));
    hash.update('\0');
  }
  return hash.digest('hex');
}

export function hashText(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
