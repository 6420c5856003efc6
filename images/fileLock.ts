/**
 * A host-wide lock on a file (flock(2) through util-linux's flock), exclusive
 * or shared, held by a child process for as long as `fn` runs. Every worker process of a
 * host shares it, and it is released when its holder dies, so a build killed
 * half-way never leaves a stale lock behind.
 */
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

/** flock exits 1 when --nonblock finds the lock taken. */
const FLOCK_BUSY = 1;

class LockBusy extends Error {}

export async function withFileLock<T>(lockFile: string, fn: () => Promise<T>, onWait?: () => void, mode: 'exclusive' | 'shared' = 'exclusive'): Promise<T> {
  return locked(lockFile, fn, onWait, [`--${mode}`]);
}

/** Runs `fn` under the exclusive lock if nobody holds the lock now; undefined (and `fn` not run) if somebody does. */
export async function tryExclusiveFileLock<T>(lockFile: string, fn: () => Promise<T>): Promise<{ value: T } | undefined> {
  try {
    return { value: await locked(lockFile, fn, undefined, ['--exclusive', '--nonblock']) };
  } catch (err) {
    if (err instanceof LockBusy) return undefined;
    throw err;
  }
}

async function locked<T>(lockFile: string, fn: () => Promise<T>, onWait: (() => void) | undefined, flags: string[]): Promise<T> {
  mkdirSync(dirname(lockFile), { recursive: true });
  // The holder prints once it has the lock, then waits on its stdin: closing that (or our exit) releases it.
  const holder = spawn('flock', [...flags, lockFile, 'sh', '-c', 'echo locked; exec cat >/dev/null'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const waitTimer = onWait ? setTimeout(onWait, 1_000) : undefined;
  try {
    await new Promise<void>((resolvePromise, reject) => {
      holder.on('error', reject);
      holder.on('exit', (code) => reject(code === FLOCK_BUSY && flags.includes('--nonblock') ? new LockBusy(lockFile) : new Error(`flock ${lockFile} exited ${code} before taking the lock`)));
      holder.stdout.once('data', () => resolvePromise());
    });
  } finally {
    if (waitTimer) clearTimeout(waitTimer);
  }
  holder.removeAllListeners('exit');
  try {
    return await fn();
  } finally {
    // The holder may be gone already (killed): then there is nothing to release, and no exit to wait for.
    if (holder.exitCode === null && holder.signalCode === null) {
      const exited = new Promise<void>((r) => holder.once('exit', () => r()));
      holder.stdin.on('error', () => undefined);
      holder.stdin.end();
      await exited;
    }
  }
}
