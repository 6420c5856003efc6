/**
 * The production topology of Temporal on one machine: PostgreSQL (persistence and SQL
 * visibility), and every Temporal service as its own process (frontend, two history processes so a
 * shard owner can die, matching, worker), each on its own loopback address so that membership,
 * shard ownership and failure detection work as between machines. The databases are created and
 * migrated with temporal-sql-tool, the namespace and search attributes registered through the
 * frontend. The services speak mTLS to each other and on the frontend with certificates of the
 * cluster's own CA (clusterCertificates.ts): a client without the cluster's client certificate is
 * refused; `clientEnv` is what a worker or the CLI connects with (TEMPORAL_TLS_*). Everything lives under one directory: configs, logs, the database, and `cluster.json`
 * (what `rollout cluster status` and `down` read).
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { freePort } from '../servers/temporalDevServer.js';
import { clusterClientEnv, ensureClusterCertificates, type ClusterCertificates } from './clusterCertificates.js';
import { setUpNamespace } from './namespaceSetup.js';
import { PASSWORD_FILE, PostgresServer, redactedUrl } from './postgresServer.js';
import { dynamicConfig, serviceConfig, type DatabaseEndpoint, type ServiceProcessAddress, type TemporalServiceName } from './serviceConfig.js';
import { resolveTemporalServer, type TemporalServerBinaries } from './temporalServerBinary.js';
import { ensureTemporalSchemas } from './temporalSchema.js';
import { TemporalServiceProcess } from './temporalServiceProcess.js';

export interface LocalClusterOptions {
  dir: string;
  /** Fixed when the databases are created; more than one so shards move between history processes. */
  historyShards?: number;
  historyProcesses?: number;
  namespace?: string;
  /** The first three octets of the loopback addresses the processes get (127.x.y.*). */
  loopbackPrefix?: string;
  /** The frontend's port; a free one when unset or taken. */
  frontendPort?: number;
  binaries?: TemporalServerBinaries;
}

export interface ClusterState {
  pid: number;
  frontendAddress: string;
  namespace: string;
  historyShards: number;
  /** The URL without its password (in passwordFile, readable by root only). */
  postgres: { url: string; passwordFile: string; pid: number | undefined };
  services: { name: string; service: TemporalServiceName; address: string; pid: number | undefined; metrics: string; log: string }[];
  /** TEMPORAL_TLS_* a client of the cluster connects with (the cluster's CA, a client certificate and key, the server name). */
  clientEnv: Record<string, string>;
  startedAt: string;
}

export const CLUSTER_STATE_FILE = 'cluster.json';

export class ClusterStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ClusterStartError';
  }
}

/**
 * Each process has an address of its own, so every service keeps Temporal's standard ports. They
 * must be below 32768: the cluster_membership table stores the membership port as a smallint.
 */
const STANDARD_PORTS: Record<TemporalServiceName, { grpc: number; membership: number }> = {
  frontend: { grpc: 7233, membership: 6933 },
  history: { grpc: 7234, membership: 6934 },
  matching: { grpc: 7235, membership: 6935 },
  worker: { grpc: 7239, membership: 6939 },
};
const FRONTEND_HTTP_PORT = 7243;
const METRICS_PORT = 8000;

function portFree(ip: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, ip, () => server.close(() => resolve(true)));
  });
}

export class LocalTemporalCluster {
  readonly postgres: PostgresServer;
  readonly services = new Map<string, TemporalServiceProcess>();
  readonly namespace: string;
  readonly historyShards: number;
  private frontendAddressValue = '';
  private certificates: ClusterCertificates | undefined;

  private constructor(
    private readonly options: LocalClusterOptions,
    postgres: PostgresServer,
    private readonly database: DatabaseEndpoint,
    private readonly binaries: TemporalServerBinaries,
  ) {
    this.postgres = postgres;
    this.namespace = options.namespace ?? 'default';
    this.historyShards = options.historyShards ?? 8;
  }

  /** Starts PostgreSQL, creates the schemas, starts every service and sets up the namespace. */
  static async start(options: LocalClusterOptions): Promise<LocalTemporalCluster> {
    const binaries = options.binaries ?? resolveTemporalServer();
    const prefix = options.loopbackPrefix ?? '127.77.0';
    for (const sub of ['config', 'logs']) mkdirSync(join(options.dir, sub), { recursive: true });
    // The shard count is fixed when the database is created; a later start must use the same.
    const shardsFile = join(options.dir, 'history-shards');
    const shards = options.historyShards ?? 8;
    if (existsSync(shardsFile)) {
      const fixed = Number(readFileSync(shardsFile, 'utf8').trim());
      if (fixed !== shards)
        throw new ClusterStartError(
          `the cluster in ${options.dir} was created with ${fixed} history shards, which never changes; start it with ${fixed} (--shards ${fixed}), or use a new directory for ${shards}`,
        );
    } else {
      writeFileSync(shardsFile, `${shards}\n`);
    }
    const dbHost = `${prefix}.10`;
    const dbPort = await freePort(dbHost);
    const postgres = new PostgresServer({ dir: join(options.dir, 'postgres'), host: dbHost, port: dbPort });
    const database: DatabaseEndpoint = { host: dbHost, port: dbPort, user: 'postgres', password: postgres.password };
    const cluster = new LocalTemporalCluster(options, postgres, database, binaries);
    try {
      await postgres.start();
      await ensureTemporalSchemas(binaries.sqlTool, database);
      await cluster.startServices(prefix);
      await setUpNamespace(cluster.frontendAddress, cluster.namespace, 1, cluster.clientEnv);
      cluster.writeState();
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  get serverVersion(): string {
    return this.binaries.version;
  }

  get frontendAddress(): string {
    return this.frontendAddressValue;
  }

  /** TEMPORAL_TLS_* for a client of this cluster (workers, the `rollout` CLI, an SDK client). */
  get clientEnv(): Record<string, string> {
    if (!this.certificates) throw new ClusterStartError('the cluster has no certificates before its services are laid out');
    return clusterClientEnv(this.certificates);
  }

  service(name: string): TemporalServiceProcess {
    const found = this.services.get(name);
    if (!found) throw new Error(`no Temporal service process ${name} in this cluster (there are: ${[...this.services.keys()].join(', ')})`);
    return found;
  }

  private async startServices(prefix: string): Promise<void> {
    const historyProcesses = this.options.historyProcesses ?? 2;
    const layout: { name: string; service: TemporalServiceName }[] = [
      { name: 'frontend', service: 'frontend' },
      ...Array.from({ length: historyProcesses }, (_, i) => ({ name: `history-${i + 1}`, service: 'history' as const })),
      { name: 'matching', service: 'matching' },
      { name: 'worker', service: 'worker' },
    ];
    const dynamicConfigFile = join(this.options.dir, 'config', 'dynamic.json');
    writeFileSync(dynamicConfigFile, JSON.stringify(dynamicConfig(), null, 2));
    const addresses: ServiceProcessAddress[] = [];
    for (const [i, entry] of layout.entries()) {
      const ip = `${prefix}.${11 + i}`;
      const ports = STANDARD_PORTS[entry.service];
      const address: ServiceProcessAddress = {
        service: entry.service,
        ip,
        grpcPort: (entry.service === 'frontend' ? this.options.frontendPort : undefined) ?? ports.grpc,
        membershipPort: ports.membership,
        metricsPort: METRICS_PORT,
        ...(entry.service === 'frontend' ? { httpPort: FRONTEND_HTTP_PORT } : {}),
      };
      for (const port of [address.grpcPort, address.membershipPort, address.metricsPort, address.httpPort]) {
        if (port !== undefined && !(await portFree(ip, port))) {
          throw new ClusterStartError(
            `${ip}:${port} (${entry.name}) is in use: another local Temporal cluster on ${prefix}.*? Stop it (rollout cluster down) or pick other addresses (--loopback-prefix).`,
          );
        }
      }
      addresses.push(address);
    }
    const frontend = addresses[0] as ServiceProcessAddress;
    this.frontendAddressValue = `${frontend.ip}:${frontend.grpcPort}`;
    const tls = ensureClusterCertificates(this.options.dir, addresses.map((a) => a.ip));
    this.certificates = tls;
    for (const [i, entry] of layout.entries()) {
      const address = addresses[i] as ServiceProcessAddress;
      const configFile = join(this.options.dir, 'config', `${entry.name}.json`);
      const config = serviceConfig({
        process: address,
        peers: addresses,
        database: this.database,
        historyShards: this.historyShards,
        frontendAddress: this.frontendAddressValue,
        dynamicConfigFile,
        tls,
      });
      writeFileSync(configFile, JSON.stringify(config, null, 2), { mode: 0o600 }); // it holds the database password
      this.services.set(entry.name, new TemporalServiceProcess(entry.name, address, this.binaries.server, configFile, join(this.options.dir, 'logs', `${entry.name}.log`)));
    }
    // The first process to start writes the cluster metadata; several at once on a fresh database race
    // for it (SaveClusterMetadata version mismatch) and the losers exit. So one first, then the rest.
    const [first, ...rest] = [...this.services.values()];
    await first?.start();
    await Promise.all(rest.map((s) => s.start()));
  }

  state(): ClusterState {
    return {
      pid: process.pid,
      frontendAddress: this.frontendAddress,
      namespace: this.namespace,
      historyShards: this.historyShards,
      postgres: { url: redactedUrl(this.postgres.url), passwordFile: join(this.options.dir, 'postgres', PASSWORD_FILE), pid: this.postgres.pid },
      services: [...this.services.values()].map((s) => ({
        name: s.name,
        service: s.address.service,
        address: `${s.address.ip}:${s.address.grpcPort}`,
        pid: s.pid,
        metrics: `http://${s.address.ip}:${s.address.metricsPort}/metrics`,
        log: s.logFile,
      })),
      clientEnv: this.certificates ? clusterClientEnv(this.certificates) : {},
      startedAt: new Date().toISOString(),
    };
  }

  writeState(): void {
    writeFileSync(join(this.options.dir, CLUSTER_STATE_FILE), `${JSON.stringify(this.state(), null, 2)}\n`);
  }

  /** Stops every service (SIGTERM, then SIGKILL), then PostgreSQL. Keeps the directory. */
  async stop(): Promise<void> {
    await Promise.all([...this.services.values()].map((s) => s.stop()));
    await this.postgres.stop();
    rmSync(join(this.options.dir, CLUSTER_STATE_FILE), { force: true });
  }

  /** Stops everything and removes the directory (database included). */
  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.options.dir, { recursive: true, force: true });
  }
}
