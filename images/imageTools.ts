/**
 * The tools that build task images on this host (Debian's podman, runc,
 * mmdebstrap) and the settings they run with. scripts/ensure-image-tools.sh
 * installs them and writes containers.conf / storage.conf into
 * `$ROLLOUT_CACHE_DIR/image-tools`; only the podman processes started here
 * see those files (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF), so the host's
 * /etc/containers stays as it was.
 */
import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClassifiedError } from '../shared/failures.js';
import { rolloutCacheDir } from '../shared/cacheDir.js';
import { guardedArgv, killBuildCgroup, reapOrphanBuilds, recordBuild } from './buildProcesses.js';
import { cleanStorageIfIdle } from './buildStorage.js';

export interface ImageTools {
  /** Where containers.conf, storage.conf and uv live (ROLLOUT_IMAGE_TOOLS, else the cache's image-tools). */
  dir: string;
  /** Root of everything the image builder keeps: bases, task images' rootfs, build logs, wheels, locks. */
  cacheDir: string;
  /** The environment every podman/mmdebstrap process gets. */
  env: NodeJS.ProcessEnv;
  /** Host directory holding uv and uvx (from PyPI). */
  uvDir: string;
  uvVersion: string;
}

export function imageTools(env: NodeJS.ProcessEnv = process.env): ImageTools {
  const cache = rolloutCacheDir(env);
  const dir = env.ROLLOUT_IMAGE_TOOLS ?? join(cache, 'image-tools');
  const complete = join(dir, '.complete');
  if (!existsSync(complete)) {
    throw new ClassifiedError(
      'infra',
      'capability_missing',
      `this host cannot build task images: ${complete} is missing. Fix: run scripts/ensure-image-tools.sh as root (installs podman, runc, mmdebstrap and writes the containers settings), then set ROLLOUT_IMAGE_TOOLS to what it prints`,
    );
  }
  const uvVersion = readFileSync(complete, 'utf8').trim();
  return {
    dir,
    cacheDir: join(cache, 'images'),
    env: {
      PATH: env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: env.HOME ?? '/root',
      LANG: 'C.UTF-8',
      CONTAINERS_CONF: join(dir, 'containers.conf'),
      CONTAINERS_STORAGE_CONF: join(dir, 'storage.conf'),
      TMPDIR: env.TMPDIR ?? '/var/tmp',
    },
    uvDir: join(dir, 'uv', `uv-${uvVersion}`),
    uvVersion,
  };
}

export interface RunResult {
  code: number;
  stdout: string;
  /** The last lines of what the command printed (stdout and stderr), for error messages. */
  tail: string;
  timedOut: boolean;
}

/** The first tool run of this process first kills what builds of dead workers left running (buildProcesses.ts). */
const reaped = new Map<string, Promise<unknown>>();

/**
 * Runs a build tool. Output goes to `logFile` when given (and its tail into
 * the result); a command past `timeoutMs` is killed with its process group,
 * and so is one whose worker dies (buildProcesses.ts).
 */
export async function runTool(tools: ImageTools, file: string, args: string[], options: RunToolOptions = {}): Promise<RunResult> {
  let reaping = reaped.get(tools.cacheDir);
  if (!reaping) {
    // Dead builds' processes first, then (if no build holds the storage now) their working containers and mounts.
    reaping = reapOrphanBuilds(tools.cacheDir)
      .then(() => cleanStorageIfIdle(tools, (f, a) => runToolNow(tools, f, a)))
      .catch(() => undefined);
    reaped.set(tools.cacheDir, reaping);
  }
  await reaping;
  return runToolNow(tools, file, args, options);
}

interface RunToolOptions {
  logFile?: string;
  timeoutMs?: number;
  input?: string;
  cgroupParent?: string;
  /** Called when the tool has ended, before its cgroups are killed and removed (to read their counters). */
  beforeCgroupCleanup?: () => void;
}

/** runTool without the first-run reaping (the reaping's own tool runs). */
async function runToolNow(tools: ImageTools, file: string, args: string[], options: RunToolOptions = {}): Promise<RunResult> {
  const result = new Promise<RunResult>((resolvePromise, reject) => {
    const [guard, guardArgs] = guardedArgv(file, args);
    const child = spawn(guard, guardArgs, { env: tools.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    const forget = child.pid === undefined ? (): void => undefined : recordBuild(tools.cacheDir, child.pid, [file, ...args].join(' '), options.cgroupParent);
    const log = options.logFile ? createWriteStream(options.logFile, { flags: 'a' }) : undefined;
    let stdout = '';
    let tail = '';
    const keep = (chunk: Buffer, isStdout: boolean): void => {
      const text = chunk.toString('utf8');
      if (isStdout && stdout.length < 16 * 1024 * 1024) stdout += text;
      tail = (tail + text).slice(-8000);
      log?.write(chunk);
    };
    child.stdout.on('data', (c: Buffer) => keep(c, true));
    child.stderr.on('data', (c: Buffer) => keep(c, false));
    let timedOut = false;
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            try {
              process.kill(-(child.pid ?? 0), 'SIGKILL');
            } catch {
              // already gone
            }
          }, options.timeoutMs);
    child.on('error', (err) => {
      forget();
      if (timer) clearTimeout(timer);
      log?.end();
      reject(new ClassifiedError('infra', 'capability_missing', `cannot run ${file}: ${err.message}. Fix: run scripts/ensure-image-tools.sh`, { cause: err }));
    });
    child.on('close', (code, signal) => {
      forget();
      if (timer) clearTimeout(timer);
      if (code === 127 && tail.includes(`${file}: not found`)) {
        log?.end();
        reject(new ClassifiedError('infra', 'capability_missing', `cannot run ${file}: not found. Fix: run scripts/ensure-image-tools.sh`));
        return;
      }
      const finish = (): void => resolvePromise({ code: code ?? (signal ? 128 : 1), stdout, tail: tail.split('\n').slice(-40).join('\n'), timedOut });
      if (log) log.end(finish);
      else finish();
    });
    // A tool may exit without reading its input (a failed build, a tool that takes none): the write then
    // fails with EPIPE, which is that tool's business, reported by its exit status, not this process's crash.
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
  const { cgroupParent } = options;
  if (!cgroupParent) return result;
  // What the tool left in its cgroups (a timed-out build's RUN container), and the cgroups themselves.
  return result.finally(async () => {
    try {
      options.beforeCgroupCleanup?.();
    } finally {
      await killBuildCgroup(cgroupParent);
    }
  });
}

/** runTool that must succeed; otherwise an error naming the command and its last output. */
export async function runToolOk(tools: ImageTools, file: string, args: string[], options: { logFile?: string; timeoutMs?: number } = {}): Promise<string> {
  const r = await runTool(tools, file, args, options);
  if (r.code !== 0) {
    throw new ClassifiedError('infra', 'provision_failed', `${file} ${args.slice(0, 3).join(' ')} failed (exit ${r.code}${r.timedOut ? ', timed out' : ''}): ${r.tail}`);
  }
  return r.stdout;
}

/** Whether the image store holds `ref`. */
export async function imageExists(tools: ImageTools, ref: string): Promise<boolean> {
  return (await runTool(tools, 'podman', ['image', 'exists', ref])).code === 0;
}

export async function imageId(tools: ImageTools, ref: string): Promise<string> {
  return (await runToolOk(tools, 'podman', ['image', 'inspect', '--format', '{{.Id}}', ref])).trim();
}
