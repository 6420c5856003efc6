/**
 * The bubblewrap arguments of a local sandbox: the namespaces, the host base
 * (read-only /usr, a minimal /etc) or an image's root filesystem, /proc, /dev,
 * the Harbor mount points, and the keeper as pid 1.
 */
import { lstatSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ResolvedSandboxSpec } from '../../shared/sandbox.js';
import type { HostPrograms } from './hostCapabilities.js';
import { execServerInitArgv } from './helper/execHelper.js';
import { HOST_ETC_ENTRIES, KEEPER_SCRIPT, PROC_READ_ONLY, SANDBOX_PATH } from './sandboxScripts.js';

let hostRootDirs: Promise<string[]> | undefined;

/** The top-level directories of the host that a host-base sandbox binds read-only (looked up once per process). */
function hostRootBinds(): Promise<string[]> {
  hostRootDirs ??= (async () => {
    const binds: string[] = [];
    for (const link of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
      const target = `/${link}`;
      try {
        // Merged-/usr hosts (Debian 12) have these as symlinks into /usr; others get a read-only bind.
        if ((await stat(target)).isDirectory()) binds.push('--ro-bind', target, target);
      } catch {
        // absent on this host
      }
    }
    return binds;
  })();
  return hostRootDirs;
}

/**
 * The sandbox's pid 1 and its capabilities. The exec server (the launcher passed it as fd 6) forks
 * every command itself, so its bounding set is what commands keep: the spec's file capabilities.
 * The bash keeper keeps none; the helper or nsenter + setpriv give each command its set.
 */
function initArgs(spec: ResolvedSandboxSpec, programs: HostPrograms, execServer: boolean): string[] {
  if (!execServer) return ['--cap-drop', 'ALL', '--info-fd', '3', '--as-pid-1', '--', programs.bash, '--norc', '--noprofile', '-c', KEEPER_SCRIPT];
  // setpcap lets the init lower the bounding set to the kept ones; it then drops setpcap itself.
  const caps = [...new Set([...spec.fileCapabilities, 'setpcap'])].flatMap((c) => ['--cap-add', `CAP_${c.toUpperCase()}`]);
  return ['--cap-drop', 'ALL', ...caps, '--info-fd', '3', '--as-pid-1', '--', ...execServerInitArgv(spec.fileCapabilities)];
}

/**
 * `beside`: the arguments of a sandbox beside this one (its verifier), run in a copy of this one's
 * launcher mount namespace and in its network namespace (provisionBeside): the same root filesystem
 * (`stateDir` is the first sandbox's), no network namespace of its own, and fresh /tmp, /root, /tests
 * and /logs where an image sandbox has them in its root filesystem (a host-base sandbox has them as
 * tmpfs of its own anyway). `beside.scratch`: a directory on the first sandbox's writable layer on
 * disk, outside its overlay (the agent never sees it), that holds those four; else they are tmpfs.
 */
export async function bwrapArgs(
  spec: ResolvedSandboxSpec,
  stateDir: string,
  diskMb: number,
  etcDir: string,
  programs: HostPrograms,
  execServer: boolean,
  beside: { scratch: string | null } | null = null,
): Promise<string[]> {
  const args = ['--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--hostname', 'sandbox'];
  // 'public': a namespace of its own too, which slirp4netns connects once the sandbox is up (userNetwork.ts).
  if (spec.network !== 'host' && !beside) args.push('--unshare-net');
  if (spec.rootfs)
    return [
      ...args,
      ...imageRootArgs(spec, stateDir, etcDir, beside ? { sizeMb: diskMb, scratch: beside.scratch } : null),
      '--chdir',
      spec.workdir,
      ...initArgs(spec, programs, execServer),
    ];
  args.push('--ro-bind', '/usr', '/usr');
  args.push(...(await hostRootBinds()));
  args.push('--perms', '0755', '--dir', '/etc');
  for (const name of ['passwd', 'group', 'hosts', 'hostname', ...(spec.network === 'public' ? ['resolv.conf'] : [])])
    args.push('--ro-bind', join(etcDir, name), `/etc/${name}`);
  for (const name of HOST_ETC_ENTRIES) args.push('--ro-bind-try', `/etc/${name}`, `/etc/${name}`);
  args.push('--proc', '/proc', '--dev', '/dev');
  // Root without capabilities may still write the sysctls of /proc/sys (mode 0644, root-owned), and
  // several of them are host-wide (kernel.core_pattern names a program the host kernel runs as root).
  // Read-only, as Docker's readonlyPaths: bwrap covers only /proc/irq and /proc/bus itself.
  for (const path of PROC_READ_ONLY) args.push('--ro-bind-try', path, path);
  args.push('--size', String(diskMb * 1024 * 1024), '--tmpfs', '/tmp');
  args.push('--tmpfs', '/root');
  // Mount points for what enters only later: tests at verify time, the reference solution for the oracle.
  args.push('--tmpfs', '/tests', '--tmpfs', '/solution');
  args.push('--tmpfs', '/logs', '--dir', '/logs/agent', '--dir', '/logs/verifier');
  args.push('--bind', join(stateDir, 'merged'), spec.workdir);
  args.push('--remount-ro', '/');
  args.push('--clearenv', '--setenv', 'PATH', SANDBOX_PATH, '--setenv', 'HOME', '/root');
  args.push('--chdir', spec.workdir, ...initArgs(spec, programs, execServer));
  return args;
}

/** The image's own /etc/nsswitch.conf when it is a regular file (never a link out of it), else the defaults in `etcDir`. */
export function pristineNsswitch(rootfs: string | undefined, etcDir: string): string {
  if (rootfs) {
    const etc = lstatSync(join(rootfs, 'etc'), { throwIfNoEntry: false });
    const own = join(rootfs, 'etc', 'nsswitch.conf');
    if (etc?.isDirectory() && lstatSync(own, { throwIfNoEntry: false })?.isFile()) return own;
  }
  return join(etcDir, 'nsswitch.conf');
}

/** The directories a verifier beside the agent has of its own, and their modes. */
export const BESIDE_DIRS = ['tmp', 'root', 'tests', 'logs'] as const;
export const BESIDE_DIR_MODES: Record<(typeof BESIDE_DIRS)[number], number> = { tmp: 0o1777, root: 0o700, tests: 0o755, logs: 0o755 };

/**
 * An image sandbox: the overlay (image root filesystem below, the size-limited tmpfs above) is the
 * whole root, writable as a container's; /proc, /dev, our hosts/hostname and the Harbor mount points
 * on top. Nothing of the host is visible but what readOnlyMounts names.
 */
function imageRootArgs(spec: ResolvedSandboxSpec, stateDir: string, etcDir: string, privateDirs: { sizeMb: number; scratch: string | null } | null): string[] {
  const args = ['--bind', join(stateDir, 'merged'), '/'];
  for (const name of ['hosts', 'hostname', ...(spec.network === 'public' ? ['resolv.conf'] : [])]) args.push('--ro-bind', join(etcDir, name), `/etc/${name}`);
  args.push('--proc', '/proc', '--dev', '/dev');
  for (const path of PROC_READ_ONLY) args.push('--ro-bind-try', path, path);
  for (const dir of ['/tmp', '/root', '/tests', '/solution', '/logs/agent', '/logs/verifier', spec.workdir]) args.push('--dir', dir);
  if (privateDirs?.scratch) {
    // A verifier beside the agent, its directories on disk as a container's are (a test's 2 GB of wheels in
    // /root/.cache is page cache there, not memory), in a part of the layer the agent's overlay does not show.
    for (const dir of BESIDE_DIRS) args.push('--bind', join(privateDirs.scratch, dir), `/${dir}`);
    args.push('--dir', '/logs/agent', '--dir', '/logs/verifier');
  } else if (privateDirs) {
    // A verifier beside the agent: what the agent's processes could have planted there, or could still
    // write, is not what its tests see; the directories are its own (the verifier restores /root and /tmp).
    const size = String(privateDirs.sizeMb * 1024 * 1024);
    args.push('--perms', '1777', '--size', size, '--tmpfs', '/tmp', '--perms', '0700', '--size', size, '--tmpfs', '/root', '--size', size, '--tmpfs', '/tests');
    args.push('--size', size, '--tmpfs', '/logs', '--dir', '/logs/agent', '--dir', '/logs/verifier');
  }
  // A verifier beside the agent looks up users and hosts as the image did: the name service switch is
  // the image's (or glibc's defaults), so a module the agent's switch names (libnss_<service>.so.2, code
  // in every process that runs `ls -l`) is never loaded by the tests.
  if (privateDirs) args.push('--ro-bind', pristineNsswitch(spec.rootfs, etcDir), '/etc/nsswitch.conf');
  for (const m of spec.readOnlyMounts) args.push('--ro-bind', m.source, m.target);
  // The same init as on the host base (the keeper's bash is what the bash tool runs in the image too).
  args.push('--clearenv', '--setenv', 'PATH', spec.env.PATH ?? SANDBOX_PATH, '--setenv', 'HOME', '/root');
  return args;
}
