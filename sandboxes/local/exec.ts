/**
 * Exec stage of a local sandbox: run a command inside a live sandbox from
 * its handle. The command joins the sandbox's cgroups, enters the namespaces
 * and root of its pid 1, drops every capability but the spec's file ones,
 * sets no_new_privs, gets the rlimit fallback, and runs with exactly the
 * environment given here; it leads its own process group, which the host
 * signals on timeout (SIGTERM, SIGKILL after a grace period).
 *
 * A sandbox whose init is the exec server (handle.execSocket: the compiled
 * helper was present at provision) runs it through one unix-socket connection
 * to that init, which forks it inside: no program starts on the host. Otherwise
 * it is one program start with the helper (`helper exec`), or without it
 * `sh` (join cgroups) -> `nsenter` -> `setpriv` -> `prlimit`.
 */
import { constants as osConstants } from 'node:os';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { LocalSandboxHandle } from '../../shared/sandbox.js';
import { BoundedOutput } from '../boundedOutput.js';
import { helperExecArgv } from './helper/execHelper.js';
import { killThroughExecServer, runThroughExecServer } from './helper/execServerClient.js';
import { errorText, sandboxError, sleep, type LocalSandboxContext } from './localSandboxContext.js';
import { isLiveProcess, isSameProcess, processStartTime } from './procfs.js';
import { JOIN_CGROUP_SCRIPT, SANDBOX_PATH } from './sandboxScripts.js';

/** Grace between SIGTERM and SIGKILL for a command that ran out of time. */
const KILL_AFTER_MS = 2_000;
/** How long a broken exec-server connection waits for the init to show it died before it counts as a transport fault. */
const TRANSPORT_SETTLE_MS = 1_000;
const TRANSPORT_RECHECK_MS = 50;

export interface RunOptions {
  env: Record<string, string>;
  stdin?: string | Uint8Array;
  maxOutputBytes: number;
  timeoutMs: number;
  signal?: AbortSignal;
  key?: string;
}

export interface RunResult {
  exitCode: number;
  stdout: BoundedOutput;
  stderr: BoundedOutput;
  durationMs: number;
  timedOut: boolean;
}

/**
 * Kills the process group of an exec recorded under the same key that still
 * runs (its worker died mid-command), and waits until it is gone.
 */
async function killSupersededExec(h: LocalSandboxHandle, keyFile: string): Promise<void> {
  let recorded: string;
  try {
    recorded = (await readFile(keyFile, 'utf8')).trim();
  } catch {
    return;
  }
  if (recorded.startsWith('server ')) {
    // A command the exec server runs: its pid is in the sandbox's pid namespace, so the init kills it.
    const [, pidText = '', startTime = ''] = recorded.split(' ');
    if (h.execSocket !== undefined && Number(pidText) > 1) {
      await killThroughExecServer(h.execSocket, Number(pidText), startTime).catch(() => undefined);
    }
    await rm(keyFile, { force: true });
    return;
  }
  const [pidText, startTime = ''] = recorded.split(' ');
  const pid = Number(pidText);
  if (Number.isInteger(pid) && pid > 0 && isSameProcess(pid, startTime)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
    for (let i = 0; i < 100 && isSameProcess(pid, startTime); i++) await sleep(20);
  }
  await rm(keyFile, { force: true });
}

/** The environment every command gets: the defaults, the spec's (an image's ENV), the call's. */
function commandEnv(h: LocalSandboxHandle, options: RunOptions): Record<string, string> {
  return { PATH: SANDBOX_PATH, HOME: '/root', USER: 'root', LANG: 'C.UTF-8', TERM: 'dumb', ...h.env, ...options.env };
}

/** argv that runs `inner` inside the sandbox; the environment is exactly what `runInSandbox` passes to spawn. */
export function enterArgv(ctx: LocalSandboxContext, h: LocalSandboxHandle, inner: string[]): string[] {
  if (ctx.helper) return helperExecArgv(ctx.helper, h, inner);
  return [
    ...(h.cgroupProcFiles.length > 0 ? [ctx.programs.sh, '-c', JOIN_CGROUP_SCRIPT, 'rollout-join-cgroup'] : []),
    ctx.programs.nsenter, '-t', String(h.pid), '-m', '-p', '-n', '-i', '-u', '-r', '-w', '--',
    ctx.programs.setpriv, `--bounding-set=-all${(h.capabilities ?? []).map((c) => `,+${c}`).join('')}`, '--inh-caps=-all', '--no-new-privs', '--',
    ...(h.memoryRlimitBytes !== null ? [ctx.programs.prlimit, `--as=${h.memoryRlimitBytes}`, '--'] : []),
    ...inner,
  ];
}

/**
 * Runs `inner` in the sandbox. The command gets its own process group (the
 * spawned entry program leads a new session), so on timeout the host signals
 * the whole group. A process that called setsid itself keeps running until
 * teardown, as documented.
 */
export async function runInSandbox(ctx: LocalSandboxContext, h: LocalSandboxHandle, inner: string[], options: RunOptions): Promise<RunResult> {
  const keyFile = options.key === undefined ? undefined : join(h.stateDir, 'execs', options.key.replace(/[^A-Za-z0-9._-]/g, '_'));
  if (keyFile) await killSupersededExec(h, keyFile);
  options.signal?.throwIfAborted();
  if (h.execSocket !== undefined) return runThroughServer(h, h.execSocket, inner, options, keyFile);
  const argv = enterArgv(ctx, h, inner);
  const started = performance.now();
  const stdout = new BoundedOutput(options.maxOutputBytes);
  const stderr = new BoundedOutput(options.maxOutputBytes);
  const command = ctx.spawner.spawn(
    {
      file: argv[0] as string,
      args: argv.slice(1),
      env: {
        ...commandEnv(h, options),
        ...(!ctx.helper && h.cgroupProcFiles.length > 0 ? { ROLLOUT_CGROUP_PROCS: h.cgroupProcFiles.join(' ') } : {}),
      },
      stdin: options.stdin === undefined ? null : typeof options.stdin === 'string' ? Buffer.from(options.stdin, 'utf8') : options.stdin,
      maxOutputBytes: options.maxOutputBytes,
    },
    (stream, chunk) => (stream === 'stdout' ? stdout : stderr).push(chunk),
  );
  let pid: number;
  try {
    pid = await command.started;
  } catch (err) {
    throw sandboxError('exec_transport', `cannot enter sandbox ${h.id}: ${errorText(err)}`, err);
  }

  let timedOut = false;
  const signalGroup = (signal: NodeJS.Signals): void => {
    try {
      process.kill(-pid, signal);
    } catch {
      // the group is already gone
    }
  };
  let killTimer: NodeJS.Timeout | undefined;
  const timeoutTimer = setTimeout(() => {
    timedOut = true;
    signalGroup('SIGTERM');
    killTimer = setTimeout(() => signalGroup('SIGKILL'), KILL_AFTER_MS);
  }, options.timeoutMs);
  const onAbort = (): void => signalGroup('SIGKILL');
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  // The key file lets a later exec under the same key (a retry after this worker died) kill this one.
  const keyWritten = keyFile
    ? mkdir(dirname(keyFile), { recursive: true }).then(() => writeFile(keyFile, `${pid} ${processStartTime(pid) ?? ''}\n`))
    : Promise.resolve();

  const exitCode = await command.exit
    .then(
      ({ code, signal, totalBytes }) => {
        stdout.countUnkept(totalBytes.stdout);
        stderr.countUnkept(totalBytes.stderr);
        return code ?? 128 + (signal ? osConstants.signals[signal] : 0);
      },
      (err: unknown) => {
        throw sandboxError('exec_transport', `sandbox ${h.id}: lost the command: ${errorText(err)}`, err);
      },
    )
    .finally(async () => {
      clearTimeout(timeoutTimer);
      if (killTimer) clearTimeout(killTimer);
      options.signal?.removeEventListener('abort', onAbort);
      if (keyFile) {
        await keyWritten.catch(() => undefined);
        await rm(keyFile, { force: true });
      }
    });
  options.signal?.throwIfAborted();
  if (timedOut) signalGroup('SIGKILL'); // stragglers of the timed-out group that outlived its leader
  return { exitCode, stdout, stderr, durationMs: performance.now() - started, timedOut };
}

/**
 * runInSandbox through the sandbox's exec server: the same timeout, abort and key semantics, with
 * the process group signalled by the init (its pids are the sandbox's, not the host's).
 */
async function runThroughServer(h: LocalSandboxHandle, socketPath: string, inner: string[], options: RunOptions, keyFile: string | undefined): Promise<RunResult> {
  const started = performance.now();
  const stdout = new BoundedOutput(options.maxOutputBytes);
  const stderr = new BoundedOutput(options.maxOutputBytes);
  let command: ReturnType<typeof runThroughExecServer>;
  try {
    command = runThroughExecServer(
      socketPath,
      {
        argv: inner,
        env: commandEnv(h, options),
        stdin: options.stdin === undefined ? null : typeof options.stdin === 'string' ? Buffer.from(options.stdin, 'utf8') : options.stdin,
        maxOutputBytes: options.maxOutputBytes,
      },
      (stream, chunk) => (stream === 'stdout' ? stdout : stderr).push(chunk),
    );
  } catch (err) {
    throw sandboxError('exec_transport', `cannot run in sandbox ${h.id}: ${errorText(err)}`, err);
  }
  const transport = async (err: unknown): Promise<never> => {
    // The init is the exec server: when it is gone (or going), so is the sandbox. A connection the
    // kernel reset while closing a dying init's files can arrive before /proc shows the death: look
    // again for a moment before calling it a transport fault.
    for (let waited = 0; ; waited += TRANSPORT_RECHECK_MS) {
      if (!isLiveProcess(h.pid, h.pidStartTime)) throw sandboxError('sandbox_lost', `sandbox ${h.id} is gone: its init process (pid ${h.pid}) no longer runs`, err);
      if (waited >= TRANSPORT_SETTLE_MS) break;
      await sleep(TRANSPORT_RECHECK_MS);
    }
    throw sandboxError('exec_transport', `cannot enter sandbox ${h.id}: ${errorText(err)}`, err);
  };
  let timedOut = false;
  let killTimer: NodeJS.Timeout | undefined;
  const timeoutTimer = setTimeout(() => {
    timedOut = true;
    command.signalGroup('SIGTERM');
    killTimer = setTimeout(() => command.signalGroup('SIGKILL'), KILL_AFTER_MS);
  }, options.timeoutMs);
  const onAbort = (): void => command.signalGroup('SIGKILL');
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  // The key file lets a later exec under the same key (a retry while this worker still runs it) kill this one.
  const keyWritten = keyFile
    ? command.started.then(async ({ pid, startTime }) => {
        if (pid <= 1) return;
        await mkdir(dirname(keyFile), { recursive: true });
        await writeFile(keyFile, `server ${pid} ${startTime}\n`);
      })
    : Promise.resolve();
  try {
    await command.started.catch(transport);
    const { code, signal, totalBytes } = await command.exit.catch(transport);
    stdout.countUnkept(totalBytes.stdout);
    stderr.countUnkept(totalBytes.stderr);
    options.signal?.throwIfAborted();
    if (timedOut) command.signalGroup('SIGKILL'); // stragglers of the timed-out group that outlived its leader
    const exitCode = code ?? 128 + (signal ? osConstants.signals[signal] : 0);
    return { exitCode, stdout, stderr, durationMs: performance.now() - started, timedOut };
  } finally {
    clearTimeout(timeoutTimer);
    if (killTimer) clearTimeout(killTimer);
    options.signal?.removeEventListener('abort', onAbort);
    command.close();
    if (keyFile) {
      await keyWritten.catch(() => undefined);
      await rm(keyFile, { force: true });
    }
  }
}
