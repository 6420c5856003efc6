/**
 * What the local provider needs from its host, checked once before the first
 * sandbox: root, overlayfs, namespaces, and the programs from Debian's
 * bubblewrap / util-linux / coreutils packages. A missing piece is an infra
 * failure of type capability_missing whose message says how to fix it.
 */
import { accessSync, constants, readFileSync } from 'node:fs';
import { ClassifiedError } from '../../shared/failures.js';

export interface HostPrograms {
  bwrap: string;
  unshare: string;
  nsenter: string;
  setpriv: string;
  env: string;
  timeout: string;
  prlimit: string;
  sh: string;
  bash: string;
  sleep: string;
}

export const DEFAULT_HOST_PROGRAMS: HostPrograms = {
  bwrap: '/usr/bin/bwrap',
  unshare: '/usr/bin/unshare',
  nsenter: '/usr/bin/nsenter',
  setpriv: '/usr/bin/setpriv',
  env: '/usr/bin/env',
  timeout: '/usr/bin/timeout',
  prlimit: '/usr/bin/prlimit',
  sh: '/bin/sh',
  bash: '/bin/bash',
  sleep: '/usr/bin/sleep',
};

const PACKAGE_OF: Record<keyof HostPrograms, string> = {
  bwrap: 'bubblewrap',
  unshare: 'util-linux',
  nsenter: 'util-linux',
  setpriv: 'util-linux',
  env: 'coreutils',
  timeout: 'coreutils',
  prlimit: 'util-linux',
  sh: 'dash',
  bash: 'bash',
  sleep: 'coreutils',
};

function missing(message: string): ClassifiedError<'infra'> {
  return new ClassifiedError('infra', 'capability_missing', `local sandbox provider: ${message}`);
}

/** Throws a capability_missing ClassifiedError naming the first thing this host lacks. */
export function checkHostCapabilities(programs: HostPrograms): void {
  if (process.platform !== 'linux') throw missing(`needs Linux namespaces; this is ${process.platform}. Use the kubernetes provider.`);
  if (typeof process.geteuid === 'function' && process.geteuid() !== 0) {
    throw missing('needs root to mount overlayfs and create namespaces; run the worker as root (or in a privileged container).');
  }
  for (const [name, path] of Object.entries(programs) as [keyof HostPrograms, string][]) {
    try {
      accessSync(path, constants.X_OK);
    } catch {
      throw missing(`${name} not found at ${path}; install it with \`apt-get install ${PACKAGE_OF[name]}\`.`);
    }
  }
  let filesystems = '';
  try {
    filesystems = readFileSync('/proc/filesystems', 'utf8');
  } catch {
    throw missing('cannot read /proc/filesystems; mount /proc.');
  }
  if (!/\toverlay$/m.test(filesystems)) throw missing('the kernel has no overlayfs; load it with `modprobe overlay`.');
  for (const ns of ['pid', 'mnt', 'net', 'ipc', 'uts']) {
    try {
      accessSync(`/proc/self/ns/${ns}`);
    } catch {
      throw missing(`the kernel has no ${ns} namespaces (CONFIG_${ns.toUpperCase()}_NS).`);
    }
  }
}
