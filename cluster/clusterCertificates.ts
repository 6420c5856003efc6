/**
 * The cluster's own certificate authority and the certificates made from it (OpenSSL's CLI,
 * Debian's), once per cluster directory under `<dir>/tls` (0700, keys 0600):
 * - `internode`: every Temporal service presents it to the others and to clients of the frontend
 *   (server and client auth; SANs: every service address and the name `temporal-cluster`);
 * - `client`: what workers, the `rollout` CLI and the worker service's system client present
 *   (client auth only).
 * The frontend and the internode ports require a client certificate from this CA, so a client
 * without one is refused at the TLS handshake. ECDSA P-256, valid for a year.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The name every certificate of the cluster is valid for, besides its addresses (TEMPORAL_TLS_SERVER_NAME). */
export const CLUSTER_TLS_NAME = 'temporal-cluster';

export interface ClusterCertificates {
  dir: string;
  caCert: string;
  internodeCert: string;
  internodeKey: string;
  clientCert: string;
  clientKey: string;
}

export class ClusterCertificateError extends Error {
  override readonly name = 'ClusterCertificateError';
}

function openssl(args: string[], cwd: string): void {
  try {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000 });
  } catch (err) {
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    throw new ClusterCertificateError(
      `openssl ${args[0] ?? ''} failed making the cluster's certificates in ${cwd}: ${stderr || (err as Error).message}. Fix: install Debian's openssl (apt-get install openssl)`,
    );
  }
}

/** The certificates of the cluster in `clusterDir`, made on first use; `addresses` are every service IP. */
export function ensureClusterCertificates(clusterDir: string, addresses: string[]): ClusterCertificates {
  const dir = join(clusterDir, 'tls');
  const certs: ClusterCertificates = {
    dir,
    caCert: join(dir, 'ca.pem'),
    internodeCert: join(dir, 'internode.pem'),
    internodeKey: join(dir, 'internode.key'),
    clientCert: join(dir, 'client.pem'),
    clientKey: join(dir, 'client.key'),
  };
  if ([certs.caCert, certs.internodeCert, certs.internodeKey, certs.clientCert, certs.clientKey].every((f) => existsSync(f))) return certs;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(
    [
      'req',
      '-x509',
      ...key,
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      '-days',
      '365',
      '-subj',
      '/CN=rollout-pipeline cluster CA',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    dir,
  );
  const issue = (name: string, subject: string, extensions: string): void => {
    writeFileSync(join(dir, `${name}.ext`), extensions);
    openssl(['req', ...key, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject], dir);
    openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '365', '-out', `${name}.pem`, '-extfile', `${name}.ext`], dir);
    rmSync(join(dir, `${name}.csr`), { force: true });
    rmSync(join(dir, `${name}.ext`), { force: true });
  };
  const sans = [`DNS:${CLUSTER_TLS_NAME}`, 'DNS:localhost', ...addresses.map((a) => `IP:${a}`)].join(',');
  issue('internode', `/CN=${CLUSTER_TLS_NAME}`, `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=${sans}\n`);
  issue('client', '/CN=rollout-pipeline client', 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\nsubjectAltName=DNS:rollout-pipeline-client\n');
  for (const file of ['ca.key', 'internode.key', 'client.key']) chmodSync(join(dir, file), 0o600);
  return certs;
}

/** The TEMPORAL_TLS_* settings a client of this cluster connects with (workers/temporalConnection.ts reads them). */
export function clusterClientEnv(certs: ClusterCertificates): Record<string, string> {
  return {
    TEMPORAL_TLS_CLIENT_CERT_PATH: certs.clientCert,
    TEMPORAL_TLS_CLIENT_KEY_PATH: certs.clientKey,
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: certs.caCert,
    TEMPORAL_TLS_SERVER_NAME: CLUSTER_TLS_NAME,
  };
}
