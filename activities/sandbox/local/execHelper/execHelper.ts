/**
 * The compiled helper (sandbox-helper.c, built by scripts/ensure-exec-helper.sh)
 * and the argv that runs a command or a launcher through it. Found through
 * ROLLOUT_EXEC_HELPER; when it is unset or not executable the provider uses
 * the program chain (join shell, nsenter, setpriv, prlimit; unshare and the
 * mount script) and says so once in its log.
 */
import { accessSync, constants } from 'node:fs';

export interface HelperChoice {
  /** Path of the helper, or null for the program chain. */
  path: string | null;
  /** Why the chain is used (said once in the log), when it is. */
  fallbackReason?: string;
}

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
  return { path };
}

const list = (items: readonly string[]): string => (items.length > 0 ? items.join(',') : '-');

/** `helper exec`: join the cgroups, enter the keeper's namespaces and root, fork, drop capabilities, exec `inner`. */
export function helperExecArgv(
  helper: string,
  target: { pid: number; pidStartTime: string; cgroupProcFiles: readonly string[]; memoryRlimitBytes: number | null; capabilities?: readonly string[] | undefined },
  inner: readonly string[],
): string[] {
  return [helper, 'exec', String(target.pid), target.pidStartTime, list(target.cgroupProcFiles), String(target.memoryRlimitBytes ?? 0), list(target.capabilities ?? []), '--', ...inner];
}

/** `helper launch`: join the cgroups, private mount namespace with tmpfs + overlay, run bwrap, record its end. */
export function helperLaunchArgv(
  helper: string,
  launch: { cgroupProcFiles: readonly string[]; memoryRlimitBytes: number | null; rwDir: string; mergedDir: string; exitFile: string; lower: string; size: string },
  bwrap: readonly string[],
): string[] {
  return [helper, 'launch', list(launch.cgroupProcFiles), String(launch.memoryRlimitBytes ?? 0), launch.rwDir, launch.mergedDir, launch.exitFile, launch.lower, launch.size, '--', ...bwrap];
}
