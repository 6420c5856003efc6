/**
 * Ctrl-C and SIGTERM for a command that must stop cleanly: the first one
 * aborts `signal` (the command then stops its work in order: for an embedded
 * run, cancel the batch's groups, then stop the workers and the server); the
 * second one runs `onSecond` (synchronous: kill what must not outlive the
 * process) and exits at once. What is left then is reaped by the next start.
 *
 * Started by npm (`npx rollout ...`, `npm run demo`), the launcher is what a
 * program holds: the project's .npmrc makes npm run the command through bash,
 * which execs it, so a SIGINT or SIGTERM npm forwards reaches this process
 * (through dash it stopped at the shell). A launcher that dies (SIGKILL) leaves
 * this process to init: that counts as SIGTERM, so the run stops in order
 * instead of going on with no one holding it. A terminal's Ctrl-C reaches npm
 * and this process both, and npm forwards its copy: a second identical signal
 * within a second of the first is that copy, not a second Ctrl-C.
 */
import { readFileSync } from 'node:fs';
export interface Interrupts {
  /** Aborted on the first SIGINT or SIGTERM; its reason is the signal's name. */
  readonly signal: AbortSignal;
  /** Stops listening (the command is done). */
  dispose(): void;
}

export function watchInterrupts(options: { onFirst?: (signal: NodeJS.Signals) => void; onSecond?: () => void } = {}): Interrupts {
  const controller = new AbortController();
  const echoes = npmEchoesGroupSignals();
  let first: { signal: NodeJS.Signals; at: number } | undefined;
  const handler = (signal: NodeJS.Signals): void => {
    if (!controller.signal.aborted) {
      first = { signal, at: Date.now() };
      controller.abort(signal);
      options.onFirst?.(signal);
      return;
    }
    // A terminal's Ctrl-C reaches npm and this process alike, and npm forwards its copy at once: one interrupt, not two.
    if (echoes && first?.signal === signal && Date.now() - first.at < ECHO_WINDOW_MS) return;
    process.stderr.write(`\n${signal} again: exiting now; the next start reaps what is left\n`);
    try {
      options.onSecond?.();
    } finally {
      process.exit(signal === 'SIGTERM' ? 143 : 130);
    }
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  const launcherWatch = watchNpmLauncher(() => handler('SIGTERM'));
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
      if (launcherWatch) clearInterval(launcherWatch);
    },
  };
}

/** How soon after a signal npm's forwarded copy of it arrives (milliseconds in practice). */
const ECHO_WINDOW_MS = 1_000;

/** The process group of a process, from /proc (undefined when it cannot be read). */
function processGroupOf(pid: number | 'self'): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2];
  } catch {
    return undefined;
  }
}

/** Whether npm launched this process and shares its process group: a signal to the group then arrives twice. */
function npmEchoesGroupSignals(): boolean {
  if (process.env.npm_command !== 'exec' && process.env.npm_command !== 'run-script') return false;
  const own = processGroupOf('self');
  return own !== undefined && own === processGroupOf(process.ppid);
}

/** When npm launched this process: calls `gone` once the launcher has died (this process was handed to another parent). */
function watchNpmLauncher(gone: () => void): NodeJS.Timeout | undefined {
  // npm exec (npx) and npm run-script; not `npm test`, whose processes start rollout runs of their own.
  if (process.env.npm_command !== 'exec' && process.env.npm_command !== 'run-script') return undefined;
  const launcher = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === launcher) return;
    clearInterval(timer);
    process.stderr.write(`\nthe npm process that launched this run (pid ${launcher}) is gone: stopping as for SIGTERM\n`);
    gone();
  }, 1_000);
  timer.unref();
  return timer;
}

/** Exit code of a command stopped by `signal` (128 + its number, as a shell reports it). */
export function interruptedExitCode(signal: AbortSignal): number {
  return signal.reason === 'SIGTERM' ? 143 : 130;
}

/** The items of `source` until `signal` aborts; the generator then returns (the source is left as it is). */
export async function* untilAborted<T>(source: AsyncIterator<T>, signal: AbortSignal): AsyncGenerator<T> {
  const aborted = new Promise<'aborted'>((resolve) => {
    if (signal.aborted) resolve('aborted');
    else signal.addEventListener('abort', () => resolve('aborted'), { once: true });
  });
  for (;;) {
    const next = source.next();
    // The source may reject later, after we stopped listening; that is not an error of ours.
    next.catch(() => undefined);
    const step = await Promise.race([next, aborted]);
    if (step === 'aborted' || step.done) return;
    yield step.value;
  }
}
