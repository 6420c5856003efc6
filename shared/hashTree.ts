/**
 * Content hashes of task files: sha256 over every file under a directory,
 * in sorted path order, covering each relative path, its executable bit and
 * its bytes. Two checkouts of the same task hash the same; any edit changes it.
 */
import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, statSync, type Dirent } from 'node:fs';
import { join, relative } from 'node:path';

/** A directory's entries in byte order of their names, so every walk visits a tree in the same order. */
function sortedEntries(dir: string): Dirent[] {
  return readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export function listFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of sortedEntries(dir)) {
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

export interface TreeFingerprint {
  /** sha256 over every file's and directory's relative path, inode, size, mode, mtime and ctime. */
  fingerprint: string;
  /** The latest mtime or ctime in the tree, ms since the epoch. */
  newestChangeMs: number;
}

/**
 * What a directory's files look like from their metadata alone, without reading
 * a byte of content: any write changes a file's ctime (which user space cannot
 * set back), so an unchanged fingerprint means unchanged contents, except for
 * writes inside one tick of the file system's coarse clock (see TaskCache).
 */
export function treeFingerprint(root: string): TreeFingerprint {
  const hash = createHash('sha256');
  let newestNs = 0n;
  const walk = (dir: string): void => {
    for (const entry of sortedEntries(dir)) {
      if (!entry.isDirectory() && !entry.isFile()) continue;
      const path = join(dir, entry.name);
      const s = lstatSync(path, { bigint: true });
      hash.update(`${relative(root, path)}\0${s.ino}\0${s.size}\0${s.mode}\0${s.mtimeNs}\0${s.ctimeNs}\n`);
      if (s.mtimeNs > newestNs) newestNs = s.mtimeNs;
      if (s.ctimeNs > newestNs) newestNs = s.ctimeNs;
      if (entry.isDirectory()) walk(path);
    }
  };
  const top = lstatSync(root, { bigint: true });
  hash.update(`.\0${top.ino}\0${top.mtimeNs}\0${top.ctimeNs}\n`);
  newestNs = top.mtimeNs > top.ctimeNs ? top.mtimeNs : top.ctimeNs;
  walk(root);
  return { fingerprint: hash.digest('hex'), newestChangeMs: Number(newestNs / 1_000_000n) };
}
