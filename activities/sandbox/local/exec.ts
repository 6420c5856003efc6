/**
 * Exec stage of a local sandbox: run a command inside a live sandbox from
 * its handle. The command joins the sandbox's cgroups, enters the namespaces
 * and root of its pid 1, drops every capability but the spec's file ones,
 * sets no_new_privs, gets the rlimit fallback, and runs with exactly the
 * environment given here; it leads its own process group, which the host
 * signals on timeout (SIGTERM, SIGKILL after a grace period).
 *
 * With the compiled helper that is one program start (`helper exec`); without
 * it, `sh` (join cgroups) -> `nsenter` -> `setpriv` -> `prlimit`.
 */
import { constants as osConstants } from 'node:os';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { LocalSandboxHandle } from '../../../shared/sandbox.js';
import { BoundedOutput } from '../boundedOutput.js';
import { helperExecArgv } from './execHelper/execHelper.js';
import { errorText, sandboxError, sleep, type LocalSandboxContext } from './localSandboxContext.js';
import { isSameProcess, processStartTime } from './procfs.js';
import { JOIN_CGROUP_SCRIPT, SANDBOX_PATH } from './sandboxScripts.js';

/** Grace between SIGTERM and SIGKILL for a command that ran out of time. */
const KILL_AFTER_MS = 2_000;

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
async function killSupersededExec(keyFile: string): Promise<void> {
  let recorded: string;
  try {
    recorded = (await readFile(keyFile, 'utf8')).trim();
  } catch {
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
  if (keyFile) await killSupersededExec(keyFile);
  options.signal?.throwIfAborted();
  const argv = enterArgv(ctx, h, inner);
  const started = performance.now();
  const stdout = new BoundedOutput(options.maxOutputBytes);
  const stderr = new BoundedOutput(options.maxOutputBytes);
  const command = ctx.spawner.spawn(
    {
      file: argv[0] as string,
      args: argv.slice(1),
      env: {
        PATH: SANDBOX_PATH,
        HOME: '/root',
        USER: 'root',
        LANG: 'C.UTF-8',
        TERM: 'dumb',
        ...h.env,
        ...options.env,
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
