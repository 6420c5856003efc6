/**
 * Reads a file of a live sandbox from the host without running anything in it: the pipeline's own
 * reads of what it must trust (the reward, an archive it made), which a program of the agent's root
 * filesystem (its /usr/bin/cat, its shell) must never serve.
 *
 * The walk starts at /proc/<init>/root (the sandbox's root in its own mount namespace, after checking
 * the init's start time so a recycled pid cannot stand in) and opens one component at a time relative
 * to the last one's descriptor (/proc/self/fd/N/NAME, Node's openat), each with O_NOFOLLOW: a symlink
 * anywhere on the path is refused, never followed (an absolute link would resolve against the host's
 * root). The last component must be a regular file (not a FIFO that blocks, not /dev/zero), opened
 * O_NONBLOCK, and is read up to `maxBytes`.
 */
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { isLiveProcess } from '../procfs.js';

export class RootedReadError extends Error {
  constructor(
    message: string,
    /** ENOENT when a component does not exist; the others are refusals. */
    readonly code: 'ENOENT' | 'ELOOP' | 'ENOTDIR' | 'ENOTREG' | 'EFBIG' | 'ESRCH' | 'EINVAL' | 'EIO',
  ) {
    super(message);
    this.name = 'RootedReadError';
  }
}

function components(path: string): string[] {
  if (!path.startsWith('/')) throw new RootedReadError(`${path}: not an absolute path`, 'EINVAL');
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.length === 0) throw new RootedReadError(`${path}: names no file`, 'EINVAL');
  if (parts.includes('..')) throw new RootedReadError(`${path}: '..' is not allowed`, 'EINVAL');
  return parts;
}

function refusal(path: string, component: string, err: unknown): RootedReadError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return new RootedReadError(`${path}: No such file or directory (at ${component})`, 'ENOENT');
  if (code === 'ELOOP') return new RootedReadError(`${path}: ${component} is a symbolic link; the pipeline's reads never follow one`, 'ELOOP');
  if (code === 'ENOTDIR') return new RootedReadError(`${path}: ${component} is not a directory (a symbolic link or a file where a directory was)`, 'ENOTDIR');
  return new RootedReadError(`${path}: cannot open ${component}: ${(err as Error).message}`, 'EIO');
}

/** Reads `path` inside the root of process `pid` (started at `pidStartTime`), at most `maxBytes`. */
export async function readInSandboxRoot(pid: number, pidStartTime: string, path: string, maxBytes: number): Promise<Uint8Array> {
  const parts = components(path);
  let dir: FileHandle;
  try {
    dir = await open(`/proc/${pid}/root`, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (err) {
    throw new RootedReadError(`${path}: the sandbox's root (/proc/${pid}/root) cannot be opened: ${(err as Error).message}`, 'ESRCH');
  }
  try {
    // Checked after the open: the descriptor now holds that process's root, whatever the pid becomes.
    if (!isLiveProcess(pid, pidStartTime)) throw new RootedReadError(`${path}: the sandbox's init (pid ${pid}) is gone`, 'ESRCH');
    for (const name of parts.slice(0, -1)) {
      let next: FileHandle;
      try {
        next = await open(`/proc/self/fd/${dir.fd}/${name}`, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      } catch (err) {
        throw refusal(path, name, err);
      }
      await dir.close();
      dir = next;
    }
    const last = parts[parts.length - 1] as string;
    let file: FileHandle;
    try {
      file = await open(`/proc/self/fd/${dir.fd}/${last}`, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY);
    } catch (err) {
      throw refusal(path, last, err);
    }
    try {
      const st = await file.stat();
      if (!st.isFile()) throw new RootedReadError(`${path}: not a regular file; the pipeline reads only regular files there`, 'ENOTREG');
      if (st.size > maxBytes) throw new RootedReadError(`${path}: ${st.size} bytes, more than the ${maxBytes} allowed`, 'EFBIG');
      const buffer = Buffer.alloc(Math.min(st.size, maxBytes) + 1);
      let filled = 0;
      while (filled < buffer.length) {
        const { bytesRead } = await file.read(buffer, filled, buffer.length - filled, filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      if (filled > maxBytes) throw new RootedReadError(`${path}: grew past the ${maxBytes} bytes allowed while read`, 'EFBIG');
      return new Uint8Array(buffer.subarray(0, filled));
    } finally {
      await file.close();
    }
  } finally {
    await dir.close().catch(() => undefined);
  }
}
