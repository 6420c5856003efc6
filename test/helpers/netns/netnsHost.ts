/**
 * A "machine" for multi-host tests: a network and UTS namespace the test made (its own hostname,
 * its own loopback), held by a `sleep` that dies with the test (setpriv --pdeathsig). Processes
 * run in it through `nsenter` (see `wrap`). Its only way out is a relay per address it may reach:
 * inside, a listener on that same ip:port; across, a Unix socket; beyond it, a forwarder to the
 * real address (in the test process), or another namespace serving that socket (`Exposed`). So no
 * link, bridge, route or address is created anywhere, and the host's network settings are
 * untouched: the namespace and its rules vanish with its last process.
 *
 * `cutOff()` drops every packet to and from the relays inside the namespace (iptables there):
 * the host's connections go silent as in a real partition (no reset, no refusal); `reconnect()`
 * removes the rules.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const RELAY_INSIDE = resolve(dirname(fileURLToPath(import.meta.url)), 'relayInside.ts');

export interface Reachable {
  host: string;
  port: number;
  /**
   * A Unix socket another namespace serves for this address (its `Exposed`); without it, the test
   * process forwards to host:port on the host's own network.
   */
  socket?: string;
}

/** An address inside this namespace that other namespaces reach through a Unix socket it serves. */
export interface Exposed {
  host: string;
  port: number;
  socket: string;
}

function run(command: string[], what: string): string {
  const r = spawnSync(command[0] as string, command.slice(1), { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${what} failed (${command.join(' ')}): ${r.stderr || r.error?.message}`);
  return r.stdout;
}

export class NetnsHost {
  private readonly outside: Server[] = [];
  private readonly sockets = new Set<Socket>();
  private relay: ChildProcess | undefined;
  private cut = false;

  private constructor(
    readonly name: string,
    private readonly holder: ChildProcess,
    private readonly dir: string,
    private readonly reachable: Reachable[],
    private readonly exposed: Exposed[],
  ) {}

  /**
   * A namespace with hostname `name` that can reach exactly `reachable` (by the same addresses),
   * and serves `exposed` to other namespaces.
   */
  static async create(name: string, dir: string, reachable: Reachable[], exposed: Exposed[] = []): Promise<NetnsHost> {
    mkdirSync(dir, { recursive: true });
    const holder = spawn('setpriv', ['--pdeathsig', 'KILL', '--', 'unshare', '--net', '--uts', '--', 'sh', '-c', `hostname ${name} && ip link set lo up && echo up && exec sleep infinity`], { stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise<void>((res, rej) => {
      let err = '';
      holder.stderr?.on('data', (d: Buffer) => (err += d.toString()));
      holder.stdout?.once('data', () => res());
      holder.once('exit', (code) => rej(new Error(`namespace holder for ${name} exited (${code}): ${err}`)));
    });
    const host = new NetnsHost(name, holder, dir, reachable, exposed);
    await host.startRelays();
    return host;
  }

  get pid(): number {
    return this.holder.pid as number;
  }

  /**
   * Prefix for a command that runs in this host's network and UTS namespaces (setpriv and nsenter exec
   * it: same pid), killed if the test process dies.
   */
  get wrap(): string[] {
    return ['setpriv', '--pdeathsig', 'KILL', '--', 'nsenter', `--target=${this.pid}`, '--net', '--uts', '--'];
  }

  private socketPath(i: number): string {
    return join(this.dir, `relay-${i}.sock`);
  }

  private async startRelays(): Promise<void> {
    for (const [i, target] of this.reachable.entries()) {
      if (target.socket !== undefined) continue; // another namespace serves it
      rmSync(this.socketPath(i), { force: true });
      const server = createServer((inbound) => {
        const outbound = connect(target.port, target.host);
        for (const s of [inbound, outbound]) {
          this.sockets.add(s);
          s.on('close', () => this.sockets.delete(s));
          s.on('error', () => {
            inbound.destroy();
            outbound.destroy();
          });
        }
        inbound.pipe(outbound);
        outbound.pipe(inbound);
      });
      await new Promise<void>((res, rej) => {
        server.once('error', rej);
        server.listen(this.socketPath(i), () => res());
      });
      this.outside.push(server);
    }
    const specs = [
      ...this.reachable.map((t, i) => `${t.host}:${t.port}=${t.socket ?? this.socketPath(i)}`),
      ...this.exposed.map((e) => `${e.socket}=${e.host}:${e.port}`),
    ];
    this.relay = await startRelay(this.wrap, specs, `relay inside ${this.name}`);
  }

  /** The hostname processes in the namespace see. */
  hostname(): string {
    return run([...this.wrap, 'hostname'], `hostname in ${this.name}`).trim();
  }

  private iptables(action: '-A' | '-D'): void {
    for (const t of this.reachable) {
      // Toward the relay's listener, and from it (its packets leave from the address it listens on).
      run([...this.wrap, 'iptables', '-w', action, 'OUTPUT', '-p', 'tcp', '-d', t.host, '--dport', String(t.port), '-j', 'DROP'], `iptables ${action} in ${this.name}`);
      run([...this.wrap, 'iptables', '-w', action, 'OUTPUT', '-p', 'tcp', '-s', t.host, '--sport', String(t.port), '-j', 'DROP'], `iptables ${action} in ${this.name}`);
    }
  }

  /** Every packet between this host and what it reaches is dropped from now on, silently. */
  cutOff(): void {
    if (this.cut) return;
    this.iptables('-A');
    this.cut = true;
  }

  reconnect(): void {
    if (!this.cut) return;
    this.iptables('-D');
    this.cut = false;
  }

  /** Stops the relays and the holder; the namespace goes with its last process. */
  async destroy(): Promise<void> {
    this.relay?.kill('SIGKILL');
    for (const s of this.sockets) s.destroy();
    await Promise.all(this.outside.map((s) => new Promise<void>((res) => s.close(() => res()))));
    this.holder.kill('SIGKILL');
  }
}

/**
 * Starts relayInside.ts under `wrap` (a namespace's nsenter prefix, or setpriv alone for the host's
 * own network) with `listen=connect` specs, once every listener is up.
 */
export async function startRelay(wrap: string[], specs: string[], what: string): Promise<ChildProcess> {
  const relay = spawn(wrap[0] as string, [...wrap.slice(1), process.execPath, '--import', 'tsx', RELAY_INSIDE, ...specs], { stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise<void>((res, rej) => {
    let err = '';
    relay.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    relay.stdout?.on('data', (d: Buffer) => {
      if (d.toString().includes('ready')) res();
    });
    relay.once('exit', (code) => rej(new Error(`${what} exited (${code}): ${err}`)));
  });
  return relay;
}

/** The host's own network settings, to compare before and after a test: links, addresses, routes, iptables rules, forwarding. */
export function hostNetworkSettings(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, command] of Object.entries({ links: ['ip', '-o', 'link'], addresses: ['ip', '-o', 'addr'], routes: ['ip', 'route'], iptables: ['iptables', '-w', '-S'] })) {
    // Counters and link state flags change with traffic; the settings do not.
    out[name] = run(command, name)
      .split('\n')
      .map((l) => l.replace(/valid_lft.*$/, '').replace(/ state \w+/, ''))
      .join('\n');
  }
  out.ipForward = run(['cat', '/proc/sys/net/ipv4/ip_forward'], 'ip_forward').trim();
  return out;
}
