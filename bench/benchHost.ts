/**
 * A worker host of the cluster benchmark: a `rollout worker` process with its own host id, data
 * directory and sandbox root, sharing the task queues with the other hosts, as an operator runs
 * one per machine. With `netns` it is a machine of its own as far as the network goes, as in the
 * chaos suite (test/helpers/netns/: network and UTS namespaces, hostname = host id, reaching only
 * the frontend and the policy endpoints through relays); without, a plain process on this host.
 * The worker starts inside the cgroup it is given (its sandboxes, forked by it, follow), under
 * `setpriv --pdeathsig KILL` so it dies with the bench.
 */
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { LocalSandboxProvider } from '../sandboxes/local/localSandboxProvider.js';
import { leaksUnder, type Leaks } from '../test/faults/faultKit.js';
import { NetnsHost, type Reachable } from '../test/helpers/netns/netnsHost.js';
import { startWorkerProcess, type WorkerProcess } from '../test/helpers/workerProcess.js';
import { janitorScheduleId } from '../workers/janitorSchedule.js';
import { processCpu } from './procStats.js';
import { commandName, pidsWhere, statFields } from '../shared/hostProcesses.js';

export interface BenchHostSpec {
  name: string;
  dir: string;
  queuePrefix: string;
  /** The Temporal frontend, host:port. */
  address: string;
  /** TEMPORAL_TLS_* for the frontend (a cluster's mTLS). */
  clientEnv: Record<string, string>;
  /** --store of the worker (shared by all hosts). */
  store: string;
  /** What a netns host may reach (the frontend, the policy servers). */
  reachable: Reachable[];
  netns: boolean;
  /** Command prefix that puts the worker in its cgroup (CgroupCpu.joinPrefix). */
  cgroupPrefix: string[];
}

export class BenchHost {
  private constructor(
    readonly name: string,
    readonly sandboxRoot: string,
    readonly worker: WorkerProcess,
    private readonly machine: NetnsHost | undefined,
  ) {}

  static async start(spec: BenchHostSpec): Promise<BenchHost> {
    const machine = spec.netns ? await NetnsHost.create(spec.name, join(spec.dir, 'netns'), spec.reachable) : undefined;
    const sandboxRoot = join(spec.dir, 'sandboxes');
    try {
      const worker = startWorkerProcess({
        queuePrefix: spec.queuePrefix,
        dataDir: join(spec.dir, 'data'),
        sandboxRoot,
        address: spec.address,
        store: spec.store,
        // info is what an operator runs (debug would charge its own log lines to the worker).
        env: { LOG_LEVEL: 'info', ...spec.clientEnv },
        wrap: [...spec.cgroupPrefix, ...(machine ? machine.wrap : ['setpriv', '--pdeathsig', 'KILL', '--'])],
        ...(machine ? {} : { hostId: spec.name }),
      });
      const host = new BenchHost(spec.name, sandboxRoot, worker, machine);
      await worker.ready;
      return host;
    } catch (err) {
      await machine?.destroy();
      throw err;
    }
  }

  get kind(): 'netns' | 'process' {
    return this.machine ? 'netns' : 'process';
  }

  get pid(): number {
    return this.worker.child.pid as number;
  }

  /** CPU of the worker's own process and of tsx's esbuild helper it runs (not its sandboxes), ms. */
  workerCpuMs(): number {
    let ms = processCpu(this.pid).selfMs;
    for (const pid of pidsWhere((p) => Number(statFields(p)?.[1]) === this.pid && commandName(p) === 'esbuild')) ms += processCpu(pid).selfMs;
    return ms;
  }

  sandboxIds(): string[] {
    return [...new Set(this.worker.lines.filter((l) => l.msg === 'sandbox provisioned').map((l) => String(l.sandbox)))];
  }

  leaks(): Leaks {
    return leaksUnder(this.sandboxRoot, this.sandboxIds());
  }

  get running(): boolean {
    return this.worker.child.exitCode === null && this.worker.child.signalCode === null;
  }

  /** SIGTERM (SIGKILL after 20 s). */
  async stopWorker(): Promise<void> {
    if (!this.running) return;
    this.worker.kill('SIGTERM');
    const timer = setTimeout(() => this.worker.kill('SIGKILL'), 20_000);
    await this.worker.exited;
    clearTimeout(timer);
  }

  /** Stops the worker, tears down any sandbox still registered, deletes its janitor schedule, removes its namespace. */
  async destroy(client: Client | undefined): Promise<void> {
    await this.stopWorker();
    const provider = new LocalSandboxProvider({ stateRoot: this.sandboxRoot });
    for (const record of await provider.list().catch(() => [])) await provider.teardown(record.id).catch(() => undefined);
    // Bounded: after a Ctrl-C the server may be gone already, and the client would retry for a minute.
    if (client) {
      let timer: NodeJS.Timeout | undefined;
      const deleted = client.schedule.getHandle(janitorScheduleId(this.name)).delete().catch(() => undefined);
      await Promise.race([deleted, new Promise<void>((r) => (timer = setTimeout(r, 5_000)))]);
      clearTimeout(timer);
    }
    await this.machine?.destroy();
  }
}
