/**
 * The compiled helper (sandbox-helper.c, built by scripts/ensure-exec-helper.sh)
 * and the argv that runs a command or a launcher through it. Found through
 * ROLLOUT_EXEC_HELPER; when it is unset or not executable the provider uses
 * the program chain (join shell, nsenter, setpriv, prlimit; unshare and the
 * mount script) and says so once in its log.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';

export interface HelperChoice {
  /** Path of the helper, or null for the program chain. */
  path: string | null;
  /** Why the chain is used (said once in the log), when it is. */
  fallbackReason?: string;
}

/** `--version` of each helper path asked about, once per process. */
const helperVersions = new Map<string, string>();

/** The helper from an explicit option (null: the chain), else from ROLLOUT_EXEC_HELPER. */
export function chooseHelper(option: string | null | undefined, env: NodeJS.ProcessEnv = process.env): HelperChoice {
  if (option === null) return { path: null };
  const path = option ?? env.ROLLOUT_EXEC_HELPER;
  if (path === undefined || path === '') {
    return { path: null, fallbackReason: 'ROLLOUT_EXEC_HELPER is not set; run `eval "$(bash scripts/setup.sh run)"` (scripts/ensure-exec-helper.sh builds it)' };
  }
  try {
    accessSync(path, constants.X_OK);
  } catch {
    return { path: null, fallbackReason: `ROLLOUT_EXEC_HELPER=${path} is not an executable file; rebuild it with bash scripts/ensure-exec-helper.sh` };
  }
  // An older build takes other arguments (a shell that still exports the path of one built from an earlier checkout).
  const version = helperVersions.get(path) ?? spawnSync(path, ['--version'], { encoding: 'utf8', timeout: 10_000 }).stdout?.trim() ?? '';
  helperVersions.set(path, version);
  if (version !== HELPER_VERSION) {
    return {
      path: null,
      fallbackReason: `ROLLOUT_EXEC_HELPER=${path} says ${JSON.stringify(version)}, this checkout needs ${JSON.stringify(HELPER_VERSION)}; run eval "$(bash scripts/setup.sh run)" (scripts/ensure-exec-helper.sh builds it)`,
    };
  }
  return { path };
}

/** What `--version` of the helper this checkout builds prints (sandbox-helper.c, main). */
const HELPER_VERSION = 'rollout-sandbox-helper 4';

const list = (items: readonly string[]): string => (items.length > 0 ? items.join(',') : '-');

/** `helper exec`: join the cgroups, enter the keeper's namespaces and root, fork, drop capabilities, exec `inner`. */
export function helperExecArgv(
  helper: string,
  target: { pid: number; pidStartTime: string; cgroupProcFiles: readonly string[]; memoryRlimitBytes: number | null; capabilities?: readonly string[] | undefined },
  inner: readonly string[],
): string[] {
  return [helper, 'exec', String(target.pid), target.pidStartTime, list(target.cgroupProcFiles), String(target.memoryRlimitBytes ?? 0), list(target.capabilities ?? []), '--', ...inner];
}

/**
 * `helper launch`: join the cgroups, private mount namespace with tmpfs + overlay, run bwrap, record
 * its end; with an exec socket, also listen on it and hand bwrap the socket and the helper for the
 * sandbox's init (sandbox-init.c).
 */
export function helperLaunchArgv(
  helper: string,
  launch: { cgroupProcFiles: readonly string[]; memoryRlimitBytes: number | null; rwDir: string; mergedDir: string; exitFile: string; lower: string; size: string; execSocket: string | null },
  bwrap: readonly string[],
): string[] {
  return [
    helper,
    'launch',
    list(launch.cgroupProcFiles),
    String(launch.memoryRlimitBytes ?? 0),
    launch.rwDir,
    launch.mergedDir,
    launch.exitFile,
    launch.lower,
    launch.size,
    launch.execSocket ?? '-',
    '--',
    ...bwrap,
  ];
}

/**
 * `helper beside`: join the cgroups, enter the mount namespace of another sandbox's launcher (a private
 * copy of it) and that sandbox's network namespace, run bwrap, record its end; the exec socket as in launch.
 */
export function helperBesideArgv(
  helper: string,
  launch: {
    cgroupProcFiles: readonly string[];
    memoryRlimitBytes: number | null;
    mountOf: { pid: number; pidStartTime: string };
    networkOf: { pid: number; pidStartTime: string };
    exitFile: string;
    execSocket: string | null;
  },
  bwrap: readonly string[],
): string[] {
  return [
    helper,
    'beside',
    list(launch.cgroupProcFiles),
    String(launch.memoryRlimitBytes ?? 0),
    String(launch.mountOf.pid),
    launch.mountOf.pidStartTime,
    String(launch.networkOf.pid),
    launch.networkOf.pidStartTime,
    launch.exitFile,
    launch.execSocket ?? '-',
    '--',
    ...bwrap,
  ];
}

/**
 * The command bwrap runs as the sandbox's pid 1 when the launcher passed the exec socket (fd 5) and
 * the helper (fd 6); `keep` are the capabilities commands keep (bwrap must --cap-add them and setpcap).
 */
export function execServerInitArgv(keep: readonly string[]): string[] {
  return ['/proc/self/fd/6', 'init', '5', '6', list(keep)];
}
