/**
 * User-mode networking for a local sandbox whose spec asks for network "public"
 * (Harbor's network_mode = "public"): slirp4netns (Debian's, 1.2) attached to
 * the sandbox's own network namespace. Its traffic leaves through ordinary
 * sockets of the slirp4netns process on the host, so the host's network
 * settings stay as they were: no bridge, no veth, no iptables rule, no
 * ip_forward.
 *
 * What the sandbox reaches: the outside (the package registries these machines
 * reach), with DNS through slirp's forwarder at 10.0.2.3. What it never
 * reaches: the host's loopback (--disable-host-loopback: 10.0.2.2 is not the
 * host's 127.0.0.1), the host's own addresses and their subnets, the private,
 * shared and link-local ranges (the cloud metadata address 169.254.169.254
 * among them), other sandboxes (each has its own slirp network with nothing
 * forwarded into it). Those are `unreachable` routes in the sandbox's own
 * namespace, which its processes cannot change (no CAP_NET_ADMIN).
 * ROLLOUT_PUBLIC_NETWORK_ALLOW (comma-separated CIDRs) routes chosen ones of
 * them out anyway, e.g. a registry mirror or proxy at a private address.
 *
 * The slirp4netns process joins the sandbox's cgroups (the sandbox's memory
 * and CPU bound its network too, and teardown's cgroup kill ends it) and its
 * pid is kept in the state directory, where teardown finds it without a cgroup.
 */
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, closeSync, constants, openSync, readFileSync, writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { ClassifiedError } from '../../shared/failures.js';
import { isSameProcess, processStartTime } from './procfs.js';

export const NETWORK_PID_FILE = 'network.pid';
export const NETWORK_LOG_FILE = 'network.log';
/** slirp4netns's DNS forwarder inside the sandbox (its default 10.0.2.0/24 network). */
export const SANDBOX_RESOLV_CONF = 'nameserver 10.0.2.3\noptions timeout:2 attempts:2\n';
/** Where slirp4netns is: ROLLOUT_SLIRP4NETNS, else Debian's path (read at each provision, so a fixed environment takes effect). */
export const slirp4netnsPath = (): string => process.env.ROLLOUT_SLIRP4NETNS ?? '/usr/bin/slirp4netns';
const IP = '/usr/sbin/ip';
const SLIRP_NETWORK = '10.0.2.0/24';

/**
 * Ranges a public sandbox never reaches: RFC 1918, shared (CGNAT; Alibaba's metadata 100.100.100.200),
 * link-local (the metadata address 169.254.169.254), "this network", multicast, reserved, and Azure's
 * host endpoint (WireServer, 168.63.129.16: a public address every Azure VM reaches).
 */
export const BLOCKED_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '169.254.0.0/16', '0.0.0.0/8', '224.0.0.0/4', '240.0.0.0/4', '168.63.129.16/32'];
/**
 * slirp's own network minus its gateway (10.0.2.2, the default route's next hop; with
 * --disable-host-loopback it is not the host) and its DNS forwarder (10.0.2.3): libslirp sends a
 * connection to any other 10.0.2.x out to the host's network, where a 10.0.2.0/24 LAN or VPC subnet
 * would answer. Our own 10.0.2.100 is in the local table, which wins over these.
 */
export const SLIRP_NETWORK_BLOCKED = ['10.0.2.0/31', '10.0.2.4/30', '10.0.2.8/29', '10.0.2.16/28', '10.0.2.32/27', '10.0.2.64/26', '10.0.2.128/25'];
const CIDR = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d|[12]\d|3[0-2])$/;

function failure(message: string): ClassifiedError<'infra'> {
  return new ClassifiedError('infra', 'provision_failed', message);
}

/** The network of an address with a prefix length, e.g. 192.0.2.2/24 -> 192.0.2.0/24. */
function networkOf(cidr: string): string {
  const [address = '', bits = '32'] = cidr.split('/');
  const value = address.split('.').reduce((n, part) => (n << 8) | Number(part), 0) >>> 0;
  const mask = Number(bits) === 0 ? 0 : (0xffffffff << (32 - Number(bits))) >>> 0;
  const network = (value & mask) >>> 0;
  return `${[24, 16, 8, 0].map((s) => (network >>> s) & 255).join('.')}/${bits}`;
}

/** What a public sandbox must not reach: the fixed ranges, then every IPv4 address of this host and its subnet. */
export function blockedDestinations(): string[] {
  const blocked = new Set(BLOCKED_RANGES);
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) {
      if (a.family !== 'IPv4' || a.internal || !a.cidr) continue;
      blocked.add(`${a.address}/32`);
      blocked.add(networkOf(a.cidr));
    }
  }
  return [...blocked];
}

/** ROLLOUT_PUBLIC_NETWORK_ALLOW, checked: CIDRs routed out through slirp even though a blocked range holds them. */
export function allowedDestinations(value = process.env.ROLLOUT_PUBLIC_NETWORK_ALLOW ?? ''): string[] {
  const entries = value.split(',').map((s) => s.trim()).filter(Boolean);
  for (const entry of entries) {
    if (!CIDR.test(entry)) {
      throw new ClassifiedError('infra', 'capability_missing', `ROLLOUT_PUBLIC_NETWORK_ALLOW: ${JSON.stringify(entry)} is not an IPv4 CIDR; use e.g. 10.1.2.3/32,10.9.0.0/16`);
    }
  }
  return entries;
}

/** The `ip -batch` lines that make the sandbox's routing table: the blocked destinations unreachable, the allowed ones out via slirp's gateway. */
export function routeCommands(blocked: string[], allowed: string[]): string[] {
  // slirp's own network stays the sandbox's link, but only for the gateway and the DNS forwarder.
  // An allowed prefix equal to a blocked one (this host's own address, allowed for a mirror on it) replaces it: the same route twice is an error.
  const unreachable = [...blocked.filter((c) => c !== SLIRP_NETWORK && !allowed.includes(c)), ...SLIRP_NETWORK_BLOCKED];
  return [...unreachable.map((c) => `route add unreachable ${c}`), ...allowed.map((c) => `route add ${c} via 10.0.2.2 dev tap0`)];
}

/**
 * Starts slirp4netns on the network namespace of `initPid` (the sandbox's init, in a namespace of its
 * own), waits until the interface is up, then installs the routes. `prefix` runs the program in the
 * sandbox's cgroups (the provider's cgroup-join shell), `env` its environment.
 */
export async function attachUserNetwork(options: { initPid: number; stateDir: string; prefix: string[]; env: Record<string, string>; nsenter: string; timeoutMs?: number }): Promise<void> {
  const { initPid, stateDir } = options;
  const slirp4netns = slirp4netnsPath();
  try {
    accessSync(slirp4netns, constants.X_OK);
  } catch {
    throw new ClassifiedError(
      'infra',
      'capability_missing',
      `local sandbox provider: network "public" needs slirp4netns, not found at ${slirp4netns}; install it with \`apt-get install slirp4netns\` (scripts/ensure-image-tools.sh does) or set ROLLOUT_SLIRP4NETNS`,
    );
  }
  const allowed = allowedDestinations();
  const logFile = join(stateDir, NETWORK_LOG_FILE);
  const argv = [...options.prefix, slirp4netns, '--configure', '--mtu=65520', '--disable-host-loopback', '--enable-sandbox', '--enable-seccomp', '--ready-fd=3', String(initPid), 'tap0'];
  const logFd = openSync(logFile, 'a');
  let child;
  try {
    // Detached: it lives as long as the sandbox, not as long as this worker.
    child = spawn(argv[0] as string, argv.slice(1), { detached: true, stdio: ['ignore', logFd, logFd, 'pipe'], env: options.env });
  } finally {
    closeSync(logFd);
  }
  if (child.pid !== undefined) writeFileSync(join(stateDir, NETWORK_PID_FILE), `${child.pid} ${processStartTime(child.pid) ?? ''}\n`);
  const ready = child.stdio[3] as Readable;
  const log = (): string => {
    try {
      return readFileSync(logFile, 'utf8').trim().slice(-1500) || '(no output)';
    } catch {
      return '(no log)';
    }
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(failure(`slirp4netns did not bring up the sandbox's network within ${options.timeoutMs ?? 10_000} ms: ${log()}`)), options.timeoutMs ?? 10_000);
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(failure(`cannot start slirp4netns: ${err.message}`));
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(failure(`slirp4netns exited (${signal ?? `code ${code}`}) before the sandbox's network was up: ${log()}`));
      });
      ready.once('data', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  } finally {
    ready.destroy();
    child.removeAllListeners('exit');
    child.unref();
  }
  const routes = spawnSync(options.nsenter, ['-t', String(initPid), '-n', '--', IP, '-batch', '-'], {
    input: `${routeCommands(blockedDestinations(), allowed).join('\n')}\n`,
    encoding: 'utf8',
    timeout: 10_000,
  });
  if (routes.status !== 0) {
    throw failure(`cannot install the sandbox's routes (ip -batch in its network namespace, exit ${routes.status ?? routes.signal}): ${(routes.stderr || routes.error?.message || '').trim()}`);
  }
}

/** Kills the sandbox's slirp4netns, if it still runs, and waits until it is gone. Returns its pid if it ran. */
export async function detachUserNetwork(stateDir: string): Promise<number | undefined> {
  let recorded: string;
  try {
    recorded = readFileSync(join(stateDir, NETWORK_PID_FILE), 'utf8').trim();
  } catch {
    return undefined;
  }
  const [pidText, startTime = ''] = recorded.split(' ');
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0 || !isSameProcess(pid, startTime)) return undefined;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return undefined;
  }
  for (let i = 0; i < 2500 && isSameProcess(pid, startTime); i++) await new Promise((r) => setTimeout(r, 2));
  return pid;
}
