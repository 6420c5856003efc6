/**
 * A real Kubernetes control plane for tests, from the binaries
 * scripts/ensure-kube.sh builds out of Go modules: etcd, kube-apiserver (RBAC,
 * token and client-cert auth, TLS from a throwaway CA) and kwok, which runs a
 * fake Node whose pods go Running and whose exec runs commands on this host
 * (kwok's "local" ClusterExec). No scheduler or controller-manager: pods name
 * their node, and the ServiceAccount admission plugin is off (the provider
 * does not mount service account tokens anyway).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { get as httpsGet, type RequestOptions } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, VersionApi } from '@kubernetes/client-node';
import { freePort } from '../../servers/temporalDevServer.js';

export const FAKE_NODE = 'kwok-node-0';
export const ADMIN_TOKEN = 'rollout-test-admin-token';

export interface KubeCluster {
  /** Admin kubeconfig (system:masters). */
  kubeConfig: KubeConfig;
  kubeconfigPath: string;
  server: string;
  /** The host directory kwok runs exec'd commands in. */
  execDir: string;
  /** PEM of the CA that signed the API server's certificate. */
  caCert: Buffer;
  adminToken: string;
  /** The throwaway CA and the other certificates (ca.crt, ca.key: a real node's certificates are signed with it). */
  pkiDir: string;
  /** Scratch directory of this cluster (removed by stop). */
  dir: string;
  /** Stops kwok, the apiserver and etcd, and removes their files. */
  stop(): Promise<void>;
}

export function kubeBinDir(): string {
  const fromEnv = process.env.KUBE_BIN_DIR;
  if (fromEnv && ['kube-apiserver', 'etcd', 'kwok'].every((b) => existsSync(join(fromEnv, b)))) return fromEnv;
  const r = spawnSync('bash', [join(import.meta.dirname, '../../scripts/ensure-kube.sh'), '--no-build'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`no Kubernetes binaries: run bash scripts/ensure-kube.sh (it builds kube-apiserver, etcd and kwok from Go modules into the cache)\n${r.stderr}`);
  return r.stdout.trim();
}

function openssl(cwd: string, args: string[]): void {
  const r = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
}

/** GET /readyz as the admin: 200 once every post-start hook (RBAC bootstrap roles among them) has finished. */
async function isReady(kubeConfig: KubeConfig, server: string): Promise<boolean> {
  const options: RequestOptions = {};
  await kubeConfig.applyToHTTPSOptions(options);
  return new Promise((resolve) => {
    const request = httpsGet(`${server}/readyz`, options, (response) => {
      response.resume();
      resolve(response.statusCode === 200);
    });
    request.on('error', () => resolve(false));
  });
}

async function waitFor(what: string, check: () => Promise<boolean>, processes: ChildProcess[], logDir: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const dead = processes.find((p) => p.exitCode !== null);
    if (dead) throw new Error(`${what}: ${dead.spawnfile} exited ${dead.exitCode}; logs in ${logDir}`);
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what}: not ready in ${timeoutMs} ms; logs in ${logDir}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export interface KubeClusterOptions {
  /**
   * Start kwok and its fake node (default). Without it the cluster has no node until a real
   * kubelet joins (test/helpers/kubeNode.ts); the apiserver then reaches kubelets by their
   * Hostname address first (a test kubelet on loopback is `localhost`: kubelet refuses a
   * loopback node IP), and kube-scheduler runs to place pods that name no node.
   */
  fakeNode?: boolean;
}

export async function startKubeCluster(options: KubeClusterOptions = {}): Promise<KubeCluster> {
  const fakeNode = options.fakeNode ?? true;
  const bin = kubeBinDir();
  const dir = mkdtempSync(join(tmpdir(), 'kube-cluster-'));
  const pki = join(dir, 'pki');
  const logs = join(dir, 'logs');
  const execDir = join(dir, 'exec');
  for (const d of [pki, logs, execDir]) mkdirSync(d);

  openssl(pki, ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=rollout-test-ca']);
  openssl(pki, ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'apiserver.key', '-out', 'apiserver.csr', '-subj', '/CN=kube-apiserver']);
  writeFileSync(join(pki, 'apiserver.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n');
  openssl(pki, ['x509', '-req', '-in', 'apiserver.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'apiserver.crt', '-days', '2', '-extfile', 'apiserver.ext']);
  openssl(pki, ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'kubelet-client.key', '-out', 'kubelet-client.csr', '-subj', '/O=system:masters/CN=kube-apiserver-kubelet-client']);
  writeFileSync(join(pki, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  openssl(pki, ['x509', '-req', '-in', 'kubelet-client.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'kubelet-client.crt', '-days', '2', '-extfile', 'client.ext']);
  openssl(pki, ['genrsa', '-out', 'sa.key', '2048']);
  openssl(pki, ['rsa', '-in', 'sa.key', '-pubout', '-out', 'sa.pub']);
  writeFileSync(join(pki, 'tokens.csv'), `${ADMIN_TOKEN},admin,admin-uid,"system:masters"\n`);

  const [etcdPort, peerPort, apiPort, kwokPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const processes: ChildProcess[] = [];
  const start = (name: string, args: string[]): ChildProcess => {
    const out = createWriteStream(join(logs, `${name}.log`));
    const child = spawn(join(bin, name), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.pipe(out);
    child.stderr?.pipe(out);
    processes.push(child);
    return child;
  };
  const stop = async (): Promise<void> => {
    // Reverse order: kwok, then the apiserver, then etcd (stopping apiserver and etcd together is slow).
    for (const p of [...processes].reverse()) {
      if (p.exitCode !== null || p.signalCode !== null) continue;
      const exited = new Promise((r) => p.once('exit', r));
      p.kill('SIGTERM');
      const timer = setTimeout(() => p.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    start('etcd', [
      '--name=test', `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdPort}`, `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`, `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=test=http://127.0.0.1:${peerPort}`, '--unsafe-no-fsync', '--log-level=warn',
    ]);
    await waitFor('etcd', async () => (await fetch(`http://127.0.0.1:${etcdPort}/health`)).ok, processes, logs);
    start('kube-apiserver', [
      `--etcd-servers=http://127.0.0.1:${etcdPort}`,
      '--bind-address=127.0.0.1', '--advertise-address=127.0.0.1', `--secure-port=${apiPort}`,
      `--tls-cert-file=${join(pki, 'apiserver.crt')}`, `--tls-private-key-file=${join(pki, 'apiserver.key')}`,
      `--client-ca-file=${join(pki, 'ca.crt')}`, `--token-auth-file=${join(pki, 'tokens.csv')}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${join(pki, 'sa.pub')}`, `--service-account-signing-key-file=${join(pki, 'sa.key')}`,
      '--service-cluster-ip-range=10.0.0.0/24', '--authorization-mode=Node,RBAC',
      '--disable-admission-plugins=ServiceAccount',
      `--kubelet-client-certificate=${join(pki, 'kubelet-client.crt')}`, `--kubelet-client-key=${join(pki, 'kubelet-client.key')}`,
      `--kubelet-preferred-address-types=${fakeNode ? 'InternalIP' : 'Hostname,InternalIP'}`,
    ]);
    const server = `https://127.0.0.1:${apiPort}`;
    const kubeconfigPath = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfigPath,
      `apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster: {server: "${server}", certificate-authority: ${join(pki, 'ca.crt')}}\nusers:\n- name: admin\n  user: {token: ${ADMIN_TOKEN}}\ncontexts:\n- name: test\n  context: {cluster: test, user: admin}\ncurrent-context: test\n`,
    );
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigPath);
    await waitFor('kube-apiserver', async () => Boolean((await kubeConfig.makeApiClient(VersionApi).getCode()).gitVersion), processes, logs);
    // /version answers before the post-start hooks finish; until rbac/bootstrap-roles has run, a service
    // account cannot even read discovery (seen in CI: 403 on GET /api/v1 right after start). /readyz waits for them.
    await waitFor('kube-apiserver /readyz', () => isReady(kubeConfig, server), processes, logs);
    const cluster = { kubeConfig, kubeconfigPath, server, execDir, caCert: readFileSync(join(pki, 'ca.crt')), adminToken: ADMIN_TOKEN, pkiDir: pki, dir, stop };
    if (!fakeNode) {
      // A real node's pods may name no node (ROLLOUT_SANDBOX_PROVIDER=kubernetes in `rollout worker`): the scheduler places them.
      start('kube-scheduler', [`--kubeconfig=${kubeconfigPath}`, '--leader-elect=false', '--bind-address=127.0.0.1', `--secure-port=${await freePort()}`]);
      return cluster;
    }

    writeFileSync(
      join(dir, 'kwok-exec.yaml'),
      `apiVersion: kwok.x-k8s.io/v1alpha1\nkind: ClusterExec\nmetadata:\n  name: local-exec\nspec:\n  execs:\n  - local:\n      workDir: ${execDir}\n`,
    );
    start('kwok', [
      `--config=${join(bin, 'kwok-stages.yaml')}`, `--config=${join(dir, 'kwok-exec.yaml')}`, `--kubeconfig=${kubeconfigPath}`,
      '--manage-all-nodes=false', '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake',
      '--node-ip=127.0.0.1', `--node-port=${kwokPort}`, `--server-address=127.0.0.1:${kwokPort}`, '--node-lease-duration-seconds=40',
    ]);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    await core.createNode({ body: { metadata: { name: FAKE_NODE, annotations: { 'kwok.x-k8s.io/node': 'fake' }, labels: { 'rollout-pipeline/sandbox-node': 'true' } } } });
    await waitFor('kwok fake node Ready', async () => {
      const node = await core.readNode({ name: FAKE_NODE });
      return Boolean(node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') && node.status.daemonEndpoints?.kubeletEndpoint?.Port);
    }, processes, logs);
    return cluster;
  } catch (err) {
    await stop();
    throw err;
  }
}
