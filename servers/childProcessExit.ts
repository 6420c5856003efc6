/**
 * The exit of a server process we started (the Temporal dev server, the
 * llama.cpp server): how it ended, once it has, and a stop that signals it
 * and escalates to SIGKILL when it does not go within the grace period.
 */
import type { ChildProcess } from 'node:child_process';

export interface ChildExit {
  /** Resolves when the process has exited (or could not be started). */
  readonly exited: Promise<void>;
  /** `exit code N`, `signal S` or the spawn error; undefined while it runs. */
  description(): string | undefined;
  /** Sends `signal`, then SIGKILL after `graceMs`; resolves with how it ended. */
  stop(signal: NodeJS.Signals, graceMs: number): Promise<string>;
}

export function watchChildExit(child: ChildProcess): ChildExit {
  let description: string | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      description = signal ? `signal ${signal}` : `exit code ${code}`;
      resolve();
    });
    child.once('error', (err) => {
      description = err.message;
      resolve();
    });
  });
  return {
    exited,
    description: () => description,
    stop: async (signal, graceMs) => {
      if (description === undefined) {
        child.kill(signal);
        const gone = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), graceMs))]);
        if (!gone) {
          child.kill('SIGKILL');
          await exited;
        }
      }
      return description ?? 'unknown';
    },
  };
}
