/**
 * Where a harness process runs: a jail on the worker's host, because a harness parses model
 * output, and a harness bug (or a version whose `execute` changed) would run the model's command
 * where the harness runs. bubblewrap (Debian's) makes it:
 * - a network namespace of its own with only loopback: no host service (the Temporal frontend,
 *   the Web UI, the inference server, a cluster's PostgreSQL), no other address. Its one way out
 *   is the capture endpoint, served by the worker on a unix socket in the run's scratch directory
 *   and relayed to 127.0.0.1:JAIL_RELAY_PORT inside the jail (python/harness_bridge/jailed.py);
 * - the host's filesystem read-only, with /root, /home, /run and /tmp replaced by empty ones
 *   (the worker's caches, credentials and unix sockets are not there), the harness's venvs and
 *   adapters and their interpreters bound read-only where they are, and the run's scratch directory the one writable
 *   host place (/tmp is a private tmpfs, gone with the jail);
 * - pid, IPC and UTS namespaces of its own (it sees no worker process);
 * - a user of its own, unprivileged (ROLLOUT_HARNESS_UID, default 64321, no capabilities, no
 *   new privileges), owner of the scratch directory only.
 * The whole jail is one process group, killed with it; --die-with-parent ends it with the worker.
 */
import { chownSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ClassifiedError } from '../shared/failures.js';
import { HARNESS_BRIDGE_DIR, harnessHome, type InstalledHarness } from './harnessInstall.js';

const BWRAP = '/usr/bin/bwrap';
const SETPRIV = '/usr/bin/setpriv';
/** The capture endpoint's address inside the jail (its own loopback: no other process is there). */
export const JAIL_RELAY_PORT = 18080;
export const CAPTURE_SOCKET = 'capture.sock';
const DEFAULT_HARNESS_UID = 64321;

/** The unprivileged user a harness runs as (ROLLOUT_HARNESS_UID), refused by name when it is not one. */
export function harnessUid(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.ROLLOUT_HARNESS_UID;
  if (raw === undefined || raw === '') return DEFAULT_HARNESS_UID;
  const uid = Number(raw);
  if (!/^\d+$/.test(raw) || uid === 0 || uid > 4_294_967_294) {
    throw new ClassifiedError(
      'infra',
      'harness_not_installed',
      `ROLLOUT_HARNESS_UID = ${JSON.stringify(raw)} is not an unprivileged user id; unset it for ${DEFAULT_HARNESS_UID}, or set a uid of its own (not 0) that no other service uses`,
    );
  }
  return uid;
}

/** Gives the scratch directory (and the capture socket in it) to the harness's user. */
export function handOver(runDir: string, uid: number): void {
  chownSync(runDir, uid, uid);
  chownSync(join(runDir, CAPTURE_SOCKET), uid, uid);
}

/**
 * The installation of the interpreter a venv was made from (pyvenv.cfg's `home` is its bin/), and
 * of the one its python resolves to: both must be in the jail, wherever they are (pyenv's under /root).
 */
function interpreterPrefixes(python: string): string[] {
  const venv = dirname(dirname(python));
  const prefixes = new Set<string>();
  try {
    const home = /^home\s*=\s*(.+)$/m.exec(readFileSync(join(venv, 'pyvenv.cfg'), 'utf8'))?.[1]?.trim();
    if (home) prefixes.add(dirname(home));
  } catch {
    // not a venv: its own prefix below
  }
  try {
    prefixes.add(dirname(dirname(realpathSync(python))));
  } catch {
    // missing: the jail's exec reports it
  }
  return [...prefixes].filter((p) => p !== '/' && p !== '/usr');
}

/** Every directory above `path`, outermost first ('/a/b/c' -> '/a', '/a/b'). */
function ancestors(path: string): string[] {
  const out: string[] = [];
  for (let dir = dirname(path); dir !== '/' && dir !== '.'; dir = dirname(dir)) out.unshift(dir);
  return out;
}

/** argv of the jailed harness: `python -m harness_bridge.jailed` relaying to the socket, then the adapter module. */
export function jailedHarnessArgv(harness: InstalledHarness, runDir: string, args: string[], env: NodeJS.ProcessEnv = process.env): [string, string[]] {
  const uid = String(harnessUid(env));
  const home = harnessHome(env);
  const jail = [
    '--die-with-parent',
    '--unshare-net',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    '--ro-bind', '/', '/',
    '--dev', '/dev',
    '--proc', '/proc',
    '--tmpfs', '/tmp',
    '--tmpfs', '/run',
    '--tmpfs', '/root',
    '--tmpfs', '/home',
    // After the empty ones: the venvs, the adapters and their interpreters where they are (they may
    // live under /root); the directories bwrap makes on the way are 0700 unless made first, 0755.
    ...[home, HARNESS_BRIDGE_DIR, ...interpreterPrefixes(harness.python)].flatMap((p) => [...ancestors(p).flatMap((a) => ['--perms', '0755', '--dir', a]), '--ro-bind', p, p]),
    ...ancestors(runDir).flatMap((a) => ['--perms', '0755', '--dir', a]),
    '--bind', runDir, runDir,
    '--chdir', runDir,
  ];
  const user = [SETPRIV, '--reuid', uid, '--regid', uid, '--clear-groups', '--no-new-privs', '--inh-caps=-all', '--bounding-set=-all', '--'];
  return [BWRAP, [...jail, '--', ...user, harness.python, '-m', 'harness_bridge.jailed', String(JAIL_RELAY_PORT), join(runDir, CAPTURE_SOCKET), harness.module, ...args]];
}
