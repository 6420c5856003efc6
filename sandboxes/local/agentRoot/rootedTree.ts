/**
 * Walks a tree the agent can write (a sandbox's writable layer) from the host without ever leaving it:
 * every directory is opened relative to its parent's descriptor (/proc/self/fd/N/NAME, Node's openat)
 * with O_NOFOLLOW, so a directory swapped for a symbolic link between two steps is refused instead of
 * followed to the host's files; entries are listed from the open descriptor and looked at with lstat.
 * The walk is bounded by an entry count, so a million empty files cannot fill the worker's memory.
 */
import { closeSync, constants, lstatSync, openSync, readdirSync, type BigIntStats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';

export class TreeTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`more than ${limit} entries`);
    this.name = 'TreeTooLargeError';
  }
}

export interface TreeEntry {
  /** Path from the walk's root, '/'-separated, no leading slash. */
  path: string;
  stat: BigIntStats;
}

/**
 * A directory held open by descriptor. Listing and lstat are synchronous: a walk of 200,000 entries is
 * a second or two of system calls instead of a thread-pool round trip per entry.
 */
export class OpenDir {
  private closed = false;

  private constructor(readonly fd: number) {}

  /** Opens a trusted host path (the start of a walk). */
  static async openTrusted(hostPath: string): Promise<OpenDir> {
    return new OpenDir(openSync(hostPath, constants.O_RDONLY | constants.O_DIRECTORY));
  }

  private child(name: string): string {
    if (name === '' || name === '.' || name === '..' || name.includes('/')) throw new Error(`not a directory entry name: ${JSON.stringify(name)}`);
    return `/proc/self/fd/${this.fd}/${name}`;
  }

  /** The directory's entry names. */
  async names(): Promise<string[]> {
    return readdirSync(`/proc/self/fd/${this.fd}`);
  }

  /** lstat of an entry (never follows it); undefined when it is gone. */
  async lstat(name: string): Promise<BigIntStats | undefined> {
    return lstatSync(this.child(name), { bigint: true, throwIfNoEntry: false });
  }

  /** Opens a subdirectory, refusing a symbolic link; undefined when it is gone or no longer a directory. */
  async openDir(name: string): Promise<OpenDir | undefined> {
    try {
      return new OpenDir(openSync(this.child(name), constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') return undefined;
      throw err;
    }
  }

  /**
   * Opens a regular file for reading (O_NOFOLLOW, O_NONBLOCK: a FIFO cannot block the walk); undefined
   * when it is gone, a link, or not a regular file once opened.
   */
  async openFile(name: string): Promise<FileHandle | undefined> {
    let file: FileHandle;
    try {
      file = await open(this.child(name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ELOOP' || code === 'ENXIO') return undefined;
      throw err;
    }
    if (!(await file.stat()).isFile()) {
      await file.close();
      return undefined;
    }
    return file;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      closeSync(this.fd);
    } catch {
      // already closed
    }
  }
}

/**
 * Every entry under `dir` (depth first, directories before their contents), at most `maxEntries`
 * (TreeTooLargeError past it). `descend(path)` may stop the walk below a directory.
 */
export async function* walkTree(dir: OpenDir, maxEntries: number, descend: (path: string) => boolean = () => true, prefix = '', counter = { n: 0 }): AsyncGenerator<TreeEntry> {
  for (const name of (await dir.names()).sort()) {
    const stat = await dir.lstat(name);
    if (!stat) continue;
    if (++counter.n > maxEntries) throw new TreeTooLargeError(maxEntries);
    const path = prefix === '' ? name : `${prefix}/${name}`;
    yield { path, stat };
    if (stat.isDirectory() && descend(path)) {
      const sub = await dir.openDir(name);
      if (!sub) continue;
      try {
        yield* walkTree(sub, maxEntries, descend, path, counter);
      } finally {
        await sub.close();
      }
    }
  }
}

/** Reads at most `maxBytes` of a regular file entry; undefined when it is not one (or gone). */
export async function readSmallFile(dir: OpenDir, name: string, maxBytes: number): Promise<Buffer | undefined> {
  const file = await dir.openFile(name);
  if (!file) return undefined;
  try {
    const buffer = Buffer.alloc(maxBytes);
    const { bytesRead } = await file.read(buffer, 0, maxBytes, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await file.close();
  }
}
