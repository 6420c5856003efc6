/**
 * The network a task image's RUN steps get: a network namespace of the build's own with user-mode
 * networking (slirp4netns), under exactly the rules of a `public` sandbox (userNetwork.ts): the
 * package registries and the outside are reached, DNS through slirp's forwarder; the host's
 * loopback (the Temporal frontend and Web UI, the inference server, a cluster's PostgreSQL), the
 * host's own addresses and subnets, the private, shared and link-local ranges and the cloud host
 * endpoints are not (unreachable routes in a namespace the build cannot change). A Dockerfile is
 * third-party code: before this, `podman build --network host` ran every RUN step in the host's
 * network namespace.
 *
 * How: a holder process (`unshare --net`, one process that dies with this worker through
 * PR_SET_PDEATHSIG) owns the namespace; slirp4netns is attached to it (also dying with this
 * worker); podman's RUN containers join it (`--network ns:/proc/<holder>/ns/net`) with
 * `--dns 10.0.2.3`, and cannot change its routes (no CAP_NET_ADMIN). No bridge, veth, iptables
 * rule or ip_forward on the host. Teardown kills slirp4netns and the holder.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClassifiedError } from '../shared/failures.js';
import { attachUserNetwork, detachUserNetwork } from '../sandboxes/local/userNetwork.js';

const SETPRIV = '/usr/bin/setpriv';
const UNSHARE = '/usr/bin/unshare';
const NSENTER = '/usr/bin/nsenter';
const IP = '/usr/sbin/ip';
/** slirp4netns's DNS forwarder in the build's namespace (its default network). */
export const BUILD_DNS = '10.0.2.3';

export interface BuildNetwork {
  /** The argv that runs `file args` inside the build's network namespace. */
  enter(file: string, args: string[]): [string, string[]];
  /** The holder's pid (its /proc/<pid>/ns/net is the build's namespace). */
  pid: number;
}

function failure(message: string): ClassifiedError<'infra'> {
  return new ClassifiedError('infra', 'provision_failed', `image build network: ${message}`);
}

async function startHolder(): Promise<ChildProcess & { pid: number }> {
  const holder = spawn(SETPRIV, ['--pdeathsig', 'KILL', '--', UNSHARE, '--net', '--', 'sleep', 'infinity'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  holder.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const pid = holder.pid;
  if (pid === undefined) throw failure(`cannot start ${UNSHARE} --net`);
  // unshare() happens before the exec of sleep: wait until the holder's namespace is not ours.
  const ours = netnsOf(process.pid);
  for (let i = 0; i < 500; i++) {
    if (holder.exitCode !== null) throw failure(`${UNSHARE} --net exited (${holder.exitCode}): ${stderr.trim() || '(no output)'}; the worker needs CAP_SYS_ADMIN (root) for builds`);
    const theirs = netnsOf(pid);
    if (theirs && theirs !== ours) return holder as ChildProcess & { pid: number };
    await new Promise((r) => setTimeout(r, 5));
  }
  holder.kill('SIGKILL');
  throw failure(`${UNSHARE} --net did not make a network namespace within 2.5 s`);
}

function netnsOf(pid: number): string | undefined {
  const r = spawnSync('readlink', [`/proc/${pid}/ns/net`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

/**
 * Runs `body` with a fresh build network; tears it down afterwards, whatever `body` did.
 * `env` is the environment slirp4netns runs with (the image tools' PATH).
 */
export async function withBuildNetwork<T>(env: NodeJS.ProcessEnv, body: (network: BuildNetwork) => Promise<T>): Promise<T> {
  const holder = await startHolder();
  const stateDir = mkdtempSync(join(tmpdir(), 'rollout-build-net-'));
  try {
    await attachUserNetwork({
      initPid: holder.pid,
      stateDir,
      // slirp4netns dies with this worker too (a build never outlives it: buildProcesses.ts).
      prefix: [SETPRIV, '--pdeathsig', 'KILL', '--'],
      env: { PATH: env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' },
      nsenter: NSENTER,
    });
    const lo = spawnSync(NSENTER, ['-t', String(holder.pid), '-n', '--', IP, 'link', 'set', 'lo', 'up'], { encoding: 'utf8', timeout: 10_000 });
    if (lo.status !== 0) throw failure(`cannot bring up loopback in the build's namespace: ${(lo.stderr || lo.error?.message || '').trim()}`);
    return await body({ pid: holder.pid, enter: (file, args) => [NSENTER, ['-t', String(holder.pid), '-n', '--', file, ...args]] });
  } finally {
    await detachUserNetwork(stateDir);
    holder.kill('SIGKILL');
    rmSync(stateDir, { recursive: true, force: true });
  }
}
