/**
 * How every `rollout` process reaches Temporal: the address (flag, else
 * TEMPORAL_ADDRESS, else 127.0.0.1:7233) plus Temporal's standard variables for
 * a server that is not a local dev server:
 *   TEMPORAL_NAMESPACE                                    (default `default`)
 *   TEMPORAL_API_KEY                                      (Temporal Cloud API key; implies TLS)
 *   TEMPORAL_TLS_CLIENT_CERT_PATH + TEMPORAL_TLS_CLIENT_KEY_PATH   (mTLS, e.g. Temporal Cloud)
 *   TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME     (a private CA / SNI)
 *   TEMPORAL_TLS=true                                     (TLS with the system's CAs)
 */
import { readFileSync } from 'node:fs';
import { Client, Connection, type ConnectionOptions } from '@temporalio/client';
import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';

export class TemporalSettingError extends Error {
  override readonly name = 'TemporalSettingError';
}

export interface TemporalSettings {
  address: string;
  namespace: string;
  tls: { clientCertPair?: { crt: Buffer; key: Buffer }; serverRootCACertificate?: Buffer; serverNameOverride?: string } | undefined;
  apiKey: string | undefined;
}

function readPem(variable: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new TemporalSettingError(`${variable}=${path}: cannot read it (${(err as Error).message}). Fix: point it at a PEM file this process can read`);
  }
}

export function temporalSettings(addressFlag: string | undefined, env: NodeJS.ProcessEnv = process.env): TemporalSettings {
  const address = addressFlag ?? env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
  const certPath = env.TEMPORAL_TLS_CLIENT_CERT_PATH;
  const keyPath = env.TEMPORAL_TLS_CLIENT_KEY_PATH;
  if (Boolean(certPath) !== Boolean(keyPath)) {
    throw new TemporalSettingError('set both TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH for mTLS, or neither');
  }
  const apiKey = env.TEMPORAL_API_KEY || undefined;
  const wantsTls = env.TEMPORAL_TLS === 'true' || Boolean(certPath) || Boolean(apiKey) || Boolean(env.TEMPORAL_TLS_SERVER_CA_CERT_PATH);
  const tls = wantsTls
    ? {
        ...(certPath && keyPath ? { clientCertPair: { crt: readPem('TEMPORAL_TLS_CLIENT_CERT_PATH', certPath), key: readPem('TEMPORAL_TLS_CLIENT_KEY_PATH', keyPath) } } : {}),
        ...(env.TEMPORAL_TLS_SERVER_CA_CERT_PATH ? { serverRootCACertificate: readPem('TEMPORAL_TLS_SERVER_CA_CERT_PATH', env.TEMPORAL_TLS_SERVER_CA_CERT_PATH) } : {}),
        ...(env.TEMPORAL_TLS_SERVER_NAME ? { serverNameOverride: env.TEMPORAL_TLS_SERVER_NAME } : {}),
      }
    : undefined;
  return { address, namespace: env.TEMPORAL_NAMESPACE || 'default', tls, apiKey };
}

function options(s: TemporalSettings): ConnectionOptions & NativeConnectionOptions {
  return { address: s.address, ...(s.tls ? { tls: s.tls } : {}), ...(s.apiKey ? { apiKey: s.apiKey } : {}) };
}

const GRPC_NOT_FOUND = 5;

/**
 * Fails with what to do when the server answers that the namespace does not exist (a new cluster
 * nobody set up, a typo in TEMPORAL_NAMESPACE). Any other answer, an outage included, is left to
 * the caller's own handling.
 */
async function checkNamespace(connection: Connection, settings: TemporalSettings): Promise<void> {
  try {
    await connection.workflowService.describeNamespace({ namespace: settings.namespace });
  } catch (err) {
    const code = typeof err === 'object' && err !== null && 'code' in err ? err.code : undefined;
    if (code !== GRPC_NOT_FOUND) return;
    await connection.close();
    throw new TemporalSettingError(
      `namespace ${JSON.stringify(settings.namespace)} does not exist on the Temporal server at ${settings.address}: create it (temporal operator namespace create --namespace ${settings.namespace} --address ${settings.address}, then register the search attributes, deploy/README.md), or set TEMPORAL_NAMESPACE to one that exists`,
    );
  }
}

/** A client for the CLI and the janitor schedule; close() releases its connection. */
export async function openTemporalClient(settings: TemporalSettings, connect: { timeoutMs?: number } = {}): Promise<{ client: Client; connection: Connection; close: () => Promise<void> }> {
  const connection = await Connection.connect({ ...options(settings), ...(connect.timeoutMs ? { connectTimeout: connect.timeoutMs } : {}) });
  await checkNamespace(connection, settings);
  return { client: new Client({ connection, namespace: settings.namespace }), connection, close: () => connection.close() };
}

export async function openWorkerConnection(settings: TemporalSettings): Promise<NativeConnection> {
  return NativeConnection.connect(options(settings));
}
