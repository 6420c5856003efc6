/**
 * The servers' own machine for the cluster chaos suite: a network and UTS namespace the test made
 * (hostname `temporal-cluster`) in which PostgreSQL and every Temporal service run, each on its own
 * loopback address there, as LocalTemporalCluster lays them out. Started and driven through a
 * launcher inside it (clusterMachineMain.ts), so the services inherit the namespace.
 *
 * Only the frontend is reachable from outside: the namespace serves it on a Unix socket, which
 * worker hosts relay to (`frontendReachable`) and which the test process reaches through a relay
 * on the same ip:port of the host's loopback (its client, the Temporal CLI and `rollout status`
 * use `frontendAddress` as they would a load balancer's). PostgreSQL, history, matching and the
 * worker service are reachable from nowhere else.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { ClusterState, LocalClusterOptions } from '../../../cluster/localCluster.js';
import type { MachineAnswer, MachineCommand } from './clusterMachineMain.js';
import { NetnsHost, startRelay, type Reachable } from './netnsHost.js';

const MAIN = resolve(dirname(fileURLToPath(import.meta.url)), 'clusterMachineMain.ts');
const FRONTEND_PORT = 7233;

export class ClusterMachine {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (s: ClusterState) => void; reject: (e: Error) => void }>();
  private stateValue: ClusterState;

  private constructor(
    readonly netns: NetnsHost,
    private readonly launcher: ChildProcess,
    private readonly ingress: ChildProcess,
    readonly frontendReachable: Reachable,
    ready: ClusterState,
    answers: AsyncIterable<string>,
  ) {
    this.stateValue = ready;
    void (async () => {
      for await (const line of answers) {
        const answer = JSON.parse(line) as MachineAnswer;
        const waiter = this.waiting.get(answer.id);
        this.waiting.delete(answer.id);
        if ('error' in answer) waiter?.reject(new Error(`cluster machine: ${answer.error}`));
        else waiter?.resolve(answer.state);
      }
      for (const w of this.waiting.values()) w.reject(new Error(`the cluster machine's launcher exited (${this.launcher.exitCode ?? this.launcher.signalCode})`));
    })();
  }

  /** Starts the namespace, the cluster inside it (`options.dir` and `loopbackPrefix` as LocalTemporalCluster takes them), and the frontend's relays. */
  static async start(dir: string, options: Omit<LocalClusterOptions, 'frontendPort' | 'binaries'> & { loopbackPrefix: string }): Promise<ClusterMachine> {
    const frontend = { host: `${options.loopbackPrefix}.11`, port: FRONTEND_PORT, socket: join(dir, 'frontend.sock') };
    const netns = await NetnsHost.create('temporal-cluster', join(dir, 'netns'), [], [frontend]);
    const launcher = spawn(netns.wrap[0] as string, [...netns.wrap.slice(1), process.execPath, '--import', 'tsx', MAIN, JSON.stringify({ ...options, frontendPort: FRONTEND_PORT })], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    launcher.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-8_000)));
    const answers = createInterface({ input: launcher.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
    const first = await answers.next();
    const message = first.done ? undefined : (JSON.parse(first.value) as { ready?: ClusterState; startError?: string });
    if (!message?.ready) {
      launcher.kill('SIGKILL');
      await netns.destroy();
      throw new Error(`the cluster did not start in its namespace: ${message?.startError ?? `its launcher exited (${launcher.exitCode ?? launcher.signalCode}): ${stderr}`}`);
    }
    const ingress = await startRelay(['setpriv', '--pdeathsig', 'KILL', '--'], [`${frontend.host}:${frontend.port}=${frontend.socket}`], 'the frontend relay on the host');
    return new ClusterMachine(netns, launcher, ingress, frontend, message.ready, { [Symbol.asyncIterator]: () => answers });
  }

  private send(command: MachineCommand): Promise<ClusterState> {
    const id = this.nextId++;
    return new Promise<ClusterState>((resolve, reject) => {
      this.waiting.set(id, {
        resolve: (state) => {
          this.stateValue = state;
          resolve(state);
        },
        reject,
      });
      this.launcher.stdin?.write(`${JSON.stringify({ id, command })}\n`);
    });
  }

  /** The frontend as the test process reaches it (the same ip:port as inside the namespace). */
  get frontendAddress(): string {
    return this.stateValue.frontendAddress;
  }

  get namespace(): string {
    return this.stateValue.namespace;
  }

  /** The last state the launcher reported: every process's address and pid. */
  get state(): ClusterState {
    return this.stateValue;
  }

  /** Fresh state from the launcher. */
  refresh(): Promise<ClusterState> {
    return this.send({ op: 'state' });
  }

  service(name: string): { kill: () => Promise<void>; start: () => Promise<void> } {
    return {
      kill: () => this.send({ op: 'kill-service', service: name }).then(() => undefined),
      start: () => this.send({ op: 'start-service', service: name }).then(() => undefined),
    };
  }

  readonly postgres = {
    stop: (): Promise<void> => this.send({ op: 'stop-postgres' }).then(() => undefined),
    start: (): Promise<void> => this.send({ op: 'start-postgres' }).then(() => undefined),
    kill: (): Promise<void> => this.send({ op: 'kill-postgres' }).then(() => undefined),
  };

  /** The network namespace a process is in (`net:[inode]`). */
  static networkOf(pid: number): string {
    return readlinkSync(`/proc/${pid}/ns/net`);
  }

  /** Stops the cluster (its directory removed), the relays and the namespace. */
  async destroy(): Promise<void> {
    if (this.launcher.exitCode === null && this.launcher.signalCode === null) {
      const exited = new Promise((res) => this.launcher.once('exit', res));
      await this.send({ op: 'destroy' }).catch(() => undefined);
      await exited;
    }
    this.ingress.kill('SIGKILL');
    await this.netns.destroy();
  }
}
