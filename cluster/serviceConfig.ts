/**
 * The static configuration of one Temporal service process (`temporal-server --config-file`):
 * PostgreSQL as the persistence and the SQL visibility store, the fixed number of history shards,
 * and this process's own address and ports. Every process of a cluster gets its own file because
 * each has its own address (membership broadcasts it); they find each other through the
 * cluster_membership table. Written as JSON, which the server's YAML loader reads as YAML.
 */

import { CLUSTER_TLS_NAME, type ClusterCertificates } from './clusterCertificates.js';

export const TEMPORAL_SERVICES = ['frontend', 'history', 'matching', 'worker'] as const;
export type TemporalServiceName = (typeof TEMPORAL_SERVICES)[number];

export const PERSISTENCE_DATABASE = 'temporal';
export const VISIBILITY_DATABASE = 'temporal_visibility';

export interface DatabaseEndpoint {
  host: string;
  port: number;
  user: string;
  password: string;
}

export interface ServiceProcessAddress {
  service: TemporalServiceName;
  /** The address it binds and broadcasts to the others. */
  ip: string;
  grpcPort: number;
  membershipPort: number;
  /** Frontend only: the HTTP API. */
  httpPort?: number;
  /** Prometheus metrics of this process. */
  metricsPort: number;
}

export interface ServiceConfigInput {
  process: ServiceProcessAddress;
  /** One address of every service (the membership monitor tracks the services the file names). */
  peers: ServiceProcessAddress[];
  database: DatabaseEndpoint;
  historyShards: number;
  /** host:port of the frontend, for clusterMetadata. */
  frontendAddress: string;
  dynamicConfigFile: string;
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** mTLS between the services and on the frontend (clusterCertificates.ts); plaintext when unset. */
  tls?: ClusterCertificates;
}

/**
 * Temporal's `global.tls`: the internode ports and the frontend present the cluster's certificate
 * and require a client certificate from its CA; the services' own clients (history to matching, the
 * worker service to the frontend) present theirs and verify the server's name.
 */
export function tlsConfig(certs: ClusterCertificates): Record<string, unknown> {
  const server = { certFile: certs.internodeCert, keyFile: certs.internodeKey, requireClientAuth: true, clientCaFiles: [certs.caCert] };
  const client = { serverName: CLUSTER_TLS_NAME, rootCaFiles: [certs.caCert] };
  return {
    internode: { server, client },
    frontend: { server, client },
    systemWorker: { certFile: certs.clientCert, keyFile: certs.clientKey, client },
  };
}

function sqlStore(database: DatabaseEndpoint, databaseName: string, maxConns: number): Record<string, unknown> {
  return {
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `${database.host}:${database.port}`,
      connectProtocol: 'tcp',
      user: database.user,
      password: database.password,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  };
}

function rpcOf(p: ServiceProcessAddress): Record<string, unknown> {
  const rpc: Record<string, unknown> = { grpcPort: p.grpcPort, membershipPort: p.membershipPort, bindOnIP: p.ip };
  if (p.httpPort !== undefined) rpc.httpPort = p.httpPort;
  return rpc;
}

export function serviceConfig(input: ServiceConfigInput): Record<string, unknown> {
  const { process: p } = input;
  const services: Record<string, unknown> = {};
  for (const peer of input.peers) services[peer.service] ??= { rpc: rpcOf(peer) };
  services[p.service] = { rpc: rpcOf(p) };
  return {
    log: { stdout: true, level: input.logLevel ?? 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: input.historyShards,
      datastores: {
        'postgres-default': sqlStore(input.database, PERSISTENCE_DATABASE, 20),
        'postgres-visibility': sqlStore(input.database, VISIBILITY_DATABASE, 5),
      },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: p.ip },
      ...(input.tls ? { tls: tlsConfig(input.tls) } : {}),
      metrics: { prometheus: { framework: 'tally', timerType: 'histogram', listenAddress: `${p.ip}:${p.metricsPort}` } },
    },
    services,
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: { active: { enabled: true, initialFailoverVersion: 1, rpcName: 'frontend', rpcAddress: input.frontendAddress } },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: input.dynamicConfigFile, pollInterval: '10s' },
  };
}

/**
 * The dynamic config every process reads: what deploy/temporal-helm-values.yaml sets, so the
 * cluster tested here is the one deployed.
 */
export function dynamicConfig(): Record<string, { value: unknown }[]> {
  return {
    'system.enableActivityEagerExecution': [{ value: true }],
  };
}
