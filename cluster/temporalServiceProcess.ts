/**
 * One Temporal service as its own OS process (`temporal-server --config-file <its file>
 * --allow-no-auth start --service <name>`), logging to a file of its own. It can be SIGKILLed and
 * started again on the same config, as the chaos cases do; "ready" means its gRPC port accepts
 * connections (the frontend's readiness to serve is checked by the cluster, through the API).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { watchChildExit, type ChildExit } from '../servers/childProcessExit.js';
import type { ServiceProcessAddress } from './serviceConfig.js';

export class TemporalServiceStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemporalServiceStartError';
  }
}

function portAccepts(ip: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: ip, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export class TemporalServiceProcess {
  private child: ChildProcess | undefined;
  private exit: ChildExit | undefined;
  /** How many times it was started (restarts count). */
  starts = 0;

  constructor(
    readonly name: string,
    readonly address: ServiceProcessAddress,
    private readonly serverBinary: string,
    private readonly configFile: string,
    readonly logFile: string,
  ) {}

  get pid(): number | undefined {
    return this.running ? this.child?.pid : undefined;
  }

  get running(): boolean {
    return this.exit !== undefined && this.exit.description() === undefined;
  }

  logTail(lines = 15): string {
    try {
      return readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).map((l) => (l.length > 400 ? `${l.slice(0, 400)}…` : l)).join('\n');
    } catch {
      return '(no log)';
    }
  }

  async start(timeoutMs = 90_000): Promise<void> {
    if (this.running) return;
    const log = openSync(this.logFile, 'a');
    try {
      // setpriv (util-linux) execs the server with a parent-death signal: if whatever started the
      // cluster dies (a killed test runner, a SIGKILLed `rollout cluster up`), the server goes too.
      this.child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', this.serverBinary, '--config-file', this.configFile, '--allow-no-auth', 'start', '--service', this.address.service], {
        stdio: ['ignore', log, log],
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root' },
      });
    } finally {
      closeSync(log);
    }
    this.exit = watchChildExit(this.child);
    this.starts++;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const ended = this.exit.description();
      if (ended) throw new TemporalServiceStartError(`Temporal ${this.name} exited during start-up (${ended}); the end of ${this.logFile}:\n${this.logTail()}`);
      if (await portAccepts(this.address.ip, this.address.grpcPort)) return;
      if (Date.now() > deadline)
        throw new TemporalServiceStartError(
          `Temporal ${this.name} did not open ${this.address.ip}:${this.address.grpcPort} in ${timeoutMs / 1000} s; the end of ${this.logFile}:\n${this.logTail()}`,
        );
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** SIGKILL, as a crash: no graceful hand-off of shards or task queue partitions. */
  async kill(): Promise<void> {
    if (this.exit && this.running) await this.exit.stop('SIGKILL', 0);
  }

  /** SIGTERM, the graceful stop (the service leaves the membership ring), SIGKILL after `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    if (this.exit && this.running) await this.exit.stop('SIGTERM', graceMs);
  }
}
