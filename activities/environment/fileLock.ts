/**
 * A host-wide exclusive lock on a file (flock(2) through util-linux's flock),
 * held by a child process for as long as `fn` runs. Every worker process of a
 * host shares it, and it is released when its holder dies, so a build killed
 * half-way never leaves a stale lock behind.
 */
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

export async function withFileLock<T>(lockFile: string, fn: () => Promise<T>, onWait?: () => void): Promise<T> {
  mkdirSync(dirname(lockFile), { recursive: true });
  // The holder prints once it has the lock, then waits on its stdin: closing that (or our exit) releases it.
  const holder = spawn('flock', ['--exclusive', lockFile, 'sh', '-c', 'echo locked; exec cat >/dev/null'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const waitTimer = onWait ? setTimeout(onWait, 1_000) : undefined;
  try {
    await new Promise<void>((resolvePromise, reject) => {
      holder.on('error', reject);
      holder.on('exit', (code) => reject(new Error(`flock ${lockFile} exited ${code} before taking the lock`)));
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
