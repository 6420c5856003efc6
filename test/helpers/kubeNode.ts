/**
 * A real Kubernetes node for tests, joined to the throwaway control plane of
 * kubeCluster.ts (started with `fakeNode: false`): kubelet (from
 * scripts/ensure-kube-node.sh) over Debian's containerd and runc, pods wired by
 * the CNI ptp plugin, images pulled from a loopback registry.
 *
 * Nothing of it stays on the host:
 * - containerd and kubelet run in a private mount namespace (propagation from
 *   the host only), so every mount they make (container root filesystems,
 *   pod network namespaces) dies with them; the kernel tunables kubelet sets
 *   (vm.overcommit_memory, kernel.panic, ...) are files of ours bound over
 *   /proc/sys there, and kubelet finds no iptables (it would add chains);
 * - the host side of each pod's veth, its route and ip_forward live in a
 *   network namespace the helper makes (the ptp plugin runs there), which has
 *   no link to the host's: pods reach nothing outside their node. A process
 *   holds it (not a /run/netns mount: something on this shared host unmounted
 *   one mid-run, and every pod's CNI call failed after that);
 * - pod cgroups are under a cgroup root of the helper's own, removed at stop;
 * - kubelet's, containerd's and the CNI's state is in a scratch directory.
 * Node name `localhost`: kubelet refuses a loopback node IP, so the
 * apiserver reaches it by its Hostname address.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { freePort } from '../../servers/temporalDevServer.js';
import type { KubeCluster } from './kubeCluster.js';
import { buildPauseImage, pushImage } from './ociRegistry.js';

export const NODE_NAME = 'localhost';
const KERNEL_TUNABLES = ['vm/overcommit_memory', 'vm/panic_on_oom', 'kernel/panic', 'kernel/panic_on_oops', 'kernel/keys/root_maxkeys', 'kernel/keys/root_maxbytes'];
const CGROUP_ROOT = '/sys/fs/cgroup';

export interface KubeNode {
  name: string;
  /** Scratch directory: logs/ holds containerd.log and kubelet.log. */
  dir: string;
  /** Containers (pod sandboxes included) containerd still has for a pod, stopped ones too (kubelet's GC removes those). */
  containersOf(podUid: string): string[];
  /** Those of them that still have a running task (processes). */
  runningContainersOf(podUid: string): string[];
  /** Every container containerd holds. */
  allContainers(): string[];
  /** PIDs still in the pod's cgroup. */
  processesOf(podUid: string): number[];
  /** Mounts in the node's mount namespace that name the pod or one of these containers. */
  mountsOf(podUid: string, containerIds: string[]): string[];
  /** Stops kubelet and containerd, kills what they left, removes cgroups, the network namespace and the files. */
  stop(): Promise<void>;
}

/** KUBE_NODE_BIN_DIR, else the cache of scripts/ensure-kube-node.sh; undefined (and why) when absent. */
export function kubeNodeBinDir(): { dir?: string; missing?: string } {
  const fromEnv = process.env.KUBE_NODE_BIN_DIR;
  if (fromEnv && existsSync(join(fromEnv, 'kubelet')) && existsSync(join(fromEnv, 'pause'))) return { dir: fromEnv };
  const r = spawnSync('bash', [join(import.meta.dirname, '../../scripts/ensure-kube-node.sh'), '--no-build'], { encoding: 'utf8' });
  if (r.status !== 0) return { missing: `no real-node binaries: run bash scripts/ensure-kube-node.sh (kubelet, pause, containerd, docker-registry) ${r.stderr.trim()}` };
  return { dir: r.stdout.trim() };
}

function run(file: string, args: string[]): string {
  const r = spawnSync(file, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${file} ${args.join(' ')}: exit ${r.status}: ${r.stderr}`);
  return r.stdout;
}

function openssl(cwd: string, args: string[]): void {
  const r = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
}

/** The cgroup v1 hierarchies (and the unified one of the hybrid layout) this host mounts. */
function hierarchies(): string[] {
  return readdirSync(CGROUP_ROOT)
    .map((d) => join(CGROUP_ROOT, d))
    .filter((d) => existsSync(join(d, 'cgroup.procs')));
}

function cgroupDirs(root: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(join(d, e.name));
    out.push(d);
  };
  if (existsSync(root)) walk(root);
  return out; // children before parents
}

function pidsIn(dir: string): number[] {
  const pids: number[] = [];
  for (const d of cgroupDirs(dir)) {
    for (const line of readFileSync(join(d, 'cgroup.procs'), 'utf8').split('\n')) if (line.trim()) pids.push(Number(line));
  }
  return pids;
}

function processesWith(needle: string): number[] {
  const pids: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (readFileSync(`/proc/${e}/cmdline`, 'utf8').includes(needle)) pids.push(Number(e));
    } catch {
      // exited meanwhile
    }
  }
  return pids.filter((p) => p !== process.pid);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function readlinkOr(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return '';
  }
}

export async function startKubeNode(cluster: KubeCluster, registry: string): Promise<KubeNode> {
  const found = kubeNodeBinDir();
  if (!found.dir) throw new Error(found.missing);
  const bin = found.dir;
  const id = randomBytes(4).toString('hex');
  const dir = mkdtempSync(join(tmpdir(), 'kube-node-'));
  const logs = join(dir, 'logs');
  const cgroupRoot = `rollout-kube-${id}`;
  for (const d of ['logs', 'pki', 'cni-bin', 'cni-conf', 'cni-data', 'no-iptables', 'tunables', 'kubelet', 'pod-logs']) mkdirSync(join(dir, d));
  const socket = join(dir, 'containerd.sock');
  let launcher: ChildProcess | undefined;
  /** Holds the test's network namespace (a process, not a /run/netns mount, which anyone may unmount). */
  let netnsHolder: ChildProcess | undefined;
  // Made on the host whatever the settings: containerd's shim sockets (/run/containerd/s), libcni's
  // result cache, kubelet's device-plugin socket and its /var/log/containers links. Removed at stop
  // when they were not there before.
  const hostPaths = ['/run/containerd', '/var/lib/cni', '/var/lib/kubelet', '/var/log/containers'].filter((p) => !existsSync(p));

  const stop = async (): Promise<void> => {
    const kill = (pids: number[]): void => {
      for (const p of pids) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    };
    // kubelet first (it would restart what is killed), then every pod process, the shims and containerd.
    const pidOf = (name: string): number | undefined => {
      try {
        return Number(readFileSync(join(dir, `${name}.pid`), 'utf8'));
      } catch {
        return undefined;
      }
    };
    const kubelet = pidOf('kubelet');
    if (kubelet) kill([kubelet]);
    for (let i = 0; i < 50; i++) {
      const left = hierarchies().flatMap((h) => pidsIn(join(h, cgroupRoot)));
      if (left.length === 0) break;
      kill(left);
      await sleep(100);
    }
    // Then containerd and its shims (their command lines name files of this directory).
    const containerd = pidOf('containerd');
    if (containerd) kill([containerd]);
    for (let i = 0; i < 50; i++) {
      const left = processesWith(dir);
      if (left.length === 0) break;
      kill(left);
      await sleep(100);
    }
    if (launcher && launcher.exitCode === null && launcher.signalCode === null) {
      const exited = new Promise((r) => launcher?.once('exit', r));
      launcher.kill('SIGKILL');
      await exited;
    }
    for (const h of hierarchies()) {
      for (const d of cgroupDirs(join(h, cgroupRoot))) {
        for (let i = 0; i < 20; i++) {
          try {
            rmdirSync(d);
            break;
          } catch {
            await sleep(100); // a killed process leaves its cgroup a moment later
          }
        }
      }
    }
    if (netnsHolder && netnsHolder.exitCode === null && netnsHolder.signalCode === null) {
      const exited = new Promise((r) => netnsHolder?.once('exit', r));
      netnsHolder.kill('SIGKILL'); // the namespace, and the host side of any veth left in it, go with it
      await exited;
    }
    for (const p of hostPaths) rmSync(p, { recursive: true, force: true });
    // KUBE_NODE_KEEP_LOGS=1 keeps kubelet's and containerd's logs (in <dir>.logs) for a failed run.
    if (process.env.KUBE_NODE_KEEP_LOGS === '1') spawnSync('cp', ['-r', logs, `${dir}.logs`]);
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    // Certificates from the cluster's CA: the kubelet's client identity (Node authorizer) and its serving certificate.
    const pki = join(dir, 'pki');
    const ca = join(cluster.pkiDir, 'ca.crt');
    const caKey = join(cluster.pkiDir, 'ca.key');
    const sign = (name: string, subject: string, ext: string): void => {
      openssl(pki, ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject]);
      writeFileSync(join(pki, `${name}.ext`), ext);
      openssl(pki, ['x509', '-req', '-in', `${name}.csr`, '-CA', ca, '-CAkey', caKey, '-CAcreateserial', '-CAserial', join(pki, 'ca.srl'), '-out', `${name}.crt`, '-days', '2', '-extfile', `${name}.ext`]);
    };
    sign('node-client', `/O=system:nodes/CN=system:node:${NODE_NAME}`, 'extendedKeyUsage=clientAuth\n');
    sign('kubelet-serving', `/CN=${NODE_NAME}`, 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
    const kubeconfig = join(dir, 'kubelet.kubeconfig');
    writeFileSync(
      kubeconfig,
      `apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster: {server: "${cluster.server}", certificate-authority: ${ca}}\nusers:\n- name: node\n  user: {client-certificate: ${join(pki, 'node-client.crt')}, client-key: ${join(pki, 'node-client.key')}}\ncontexts:\n- name: test\n  context: {cluster: test, user: node}\ncurrent-context: test\n`,
    );

    // The pause image, from the registry like every other image (nothing is pulled from outside).
    const pauseRef = `${registry}/rollout-pause:${id}`;
    buildPauseImage(join(bin, 'pause'), `localhost/rollout-pause:${id}`);
    pushImage(`localhost/rollout-pause:${id}`, pauseRef);
    spawnSync('podman', ['rmi', `localhost/rollout-pause:${id}`], { env: { ...process.env } });

    // Networking: a network namespace of ours holds the host side of every pod's veth.
    const holder = spawn('unshare', ['--net', 'sleep', 'infinity'], { stdio: 'ignore' });
    netnsHolder = holder;
    const holderNetns = `/proc/${holder.pid}/ns/net`;
    for (let i = 0; readlinkOr(holderNetns) === readlinkOr('/proc/self/ns/net'); i++) {
      if (holder.exitCode !== null || i > 100) throw new Error(`unshare --net did not make a network namespace (exit ${holder.exitCode})`);
      await sleep(50);
    }
    run('nsenter', [`--net=${holderNetns}`, 'ip', 'link', 'set', 'lo', 'up']);
    writeFileSync(join(dir, 'cni-bin', 'ptp'), `#!/bin/sh\n# ptp in the test's network namespace: the host side of each pod's veth lives there.\nexec nsenter --net=${holderNetns} /usr/lib/cni/ptp "$@"\n`, { mode: 0o755 });
    for (const p of ['host-local', 'loopback']) writeFileSync(join(dir, 'cni-bin', p), `#!/bin/sh\nexec /usr/lib/cni/${p} "$@"\n`, { mode: 0o755 });
    writeFileSync(
      join(dir, 'cni-conf', '10-rollout.conflist'),
      JSON.stringify({ cniVersion: '1.0.0', name: 'rollout-test', plugins: [{ type: 'ptp', ipMasq: false, ipam: { type: 'host-local', dataDir: join(dir, 'cni-data'), ranges: [[{ subnet: '10.244.0.0/24' }]], routes: [{ dst: '0.0.0.0/0' }] } }] }),
    );
    for (const b of ['iptables', 'ip6tables', 'iptables-save', 'ip6tables-save', 'iptables-restore', 'ip6tables-restore']) {
      writeFileSync(join(dir, 'no-iptables', b), '#!/bin/sh\necho "no iptables for the test kubelet (it would add chains to the host)" >&2\nexit 1\n', { mode: 0o755 });
    }

    // Cgroups: a root of ours in every hierarchy (cpuset needs its cpus and mems before any child).
    for (const h of hierarchies()) {
      mkdirSync(join(h, cgroupRoot), { recursive: true });
      if (h.endsWith('/cpuset')) for (const f of ['cpuset.cpus', 'cpuset.mems']) writeFileSync(join(h, cgroupRoot, f), readFileSync(join(h, f)));
    }

    const streamPort = await freePort();
    writeFileSync(
      join(dir, 'containerd.toml'),
      `version = 2
root = "${join(dir, 'containerd', 'root')}"
state = "${join(dir, 'containerd', 'state')}"
[grpc]
  address = "${socket}"
[ttrpc]
  address = "${socket}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${pauseRef}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "${streamPort}"
  # root here lacks CAP_SYS_RESOURCE: no container may get a lower OOM score than containerd's own
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "${join(dir, 'runc')}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${join(dir, 'cni-bin')}"
    conf_dir = "${join(dir, 'cni-conf')}"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."${registry}"]
    endpoint = ["http://${registry}"]
`,
    );
    const [kubeletPort, healthzPort] = [await freePort(), await freePort()];
    writeFileSync(
      join(dir, 'kubelet.yaml'),
      `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /${cgroupRoot}
containerRuntimeEndpoint: unix://${socket}
address: 127.0.0.1
port: ${kubeletPort}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: ${healthzPort}
tlsCertFile: ${join(pki, 'kubelet-serving.crt')}
tlsPrivateKeyFile: ${join(pki, 'kubelet-serving.key')}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: ${ca}}
authorization: {mode: AlwaysAllow}
podLogsDir: ${join(dir, 'pod-logs')}
failSwapOn: false
resolvConf: ""
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
enforceNodeAllocatable: ["pods"]
serializeImagePulls: false
`,
    );
    const tunables = KERNEL_TUNABLES.map((t) => `f=${join(dir, 'tunables')}/${t.replace(/\//g, '.')}; cat /proc/sys/${t} > "$f"; mount --bind "$f" /proc/sys/${t}`).join('\n');
    const script = `set -e
${tunables}
containerd --config ${join(dir, 'containerd.toml')} > ${join(logs, 'containerd.log')} 2>&1 &
echo $! > ${join(dir, 'containerd.pid')}
for i in $(seq 100); do [ -S ${socket} ] && break; sleep 0.1; done
PATH=${join(dir, 'no-iptables')}:$PATH ${join(bin, 'kubelet')} --config=${join(dir, 'kubelet.yaml')} --kubeconfig=${kubeconfig} --root-dir=${join(dir, 'kubelet')} --hostname-override=${NODE_NAME} --v=1 > ${join(logs, 'kubelet.log')} 2>&1 &
echo $! > ${join(dir, 'kubelet.pid')}
wait
`;
    writeFileSync(join(dir, 'node.sh'), script);
    const out = createWriteStream(join(logs, 'node.log'));
    launcher = spawn('unshare', ['--mount', '--propagation', 'slave', 'bash', join(dir, 'node.sh')], { stdio: ['ignore', 'pipe', 'pipe'] });
    launcher.stdout?.pipe(out);
    launcher.stderr?.pipe(out);

    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    for (const deadline = Date.now() + 120_000; ; ) {
      if (launcher.exitCode !== null) throw new Error(`the node's launcher exited ${launcher.exitCode}; logs in ${logs}: ${readFileSync(join(logs, 'node.log'), 'utf8')}`);
      const node = await core.readNode({ name: NODE_NAME }).catch(() => undefined);
      if (node?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) {
        // kubelet registers with the not-ready taint, which kube-controller-manager's node lifecycle
        // controller lifts once the node is Ready; no controller-manager runs here, so lift it for the scheduler.
        if (node.spec?.taints?.length) await core.patchNode({ name: NODE_NAME, body: [{ op: 'remove', path: '/spec/taints' }] }, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch));
        break;
      }
      if (Date.now() > deadline) throw new Error(`kubelet did not make node ${NODE_NAME} Ready in 120 s; logs in ${logs}`);
      await sleep(300);
    }
  } catch (err) {
    const kept = `${dir}.failed`;
    spawnSync('cp', ['-r', logs, kept]);
    await stop();
    throw new Error(`${err instanceof Error ? err.message : String(err)} (logs copied to ${kept})`);
  }

  const containerdPid = (): number => Number(readFileSync(join(dir, 'containerd.pid'), 'utf8'));
  const ctr = (args: string[]): string => run('ctr', ['--address', socket, '--namespace', 'k8s.io', ...args]);
  const containersOf = (podUid: string): string[] =>
    ctr(['containers', 'list', '--quiet', `labels."io.kubernetes.pod.uid"==${podUid}`])
      .split('\n')
      .filter(Boolean);
  return {
    name: NODE_NAME,
    dir,
    containersOf,
    allContainers: () => ctr(['containers', 'list', '--quiet']).split('\n').filter(Boolean),
    runningContainersOf: (podUid) => {
      const running = new Set(
        ctr(['tasks', 'list'])
          .split('\n')
          .slice(1)
          .map((l) => l.trim().split(/\s+/))
          .filter((f) => f[2] === 'RUNNING')
          .map((f) => f[0]),
      );
      return containersOf(podUid).filter((c) => running.has(c));
    },
    processesOf: (podUid) => {
      const marker = `pod${podUid}`;
      const pids: number[] = [];
      for (const h of hierarchies()) {
        const walk = (d: string): void => {
          if (!existsSync(d) || !statSync(d).isDirectory()) return;
          for (const e of readdirSync(d, { withFileTypes: true })) {
            if (!e.isDirectory()) continue;
            if (e.name === marker) pids.push(...pidsIn(join(d, e.name)));
            else walk(join(d, e.name));
          }
        };
        walk(join(h, cgroupRoot));
      }
      return [...new Set(pids)];
    },
    mountsOf: (podUid, containerIds) => {
      const mountinfo = readFileSync(`/proc/${containerdPid()}/mountinfo`, 'utf8').split('\n');
      const ids = [podUid, ...containerIds];
      return mountinfo.filter((l) => ids.some((i) => l.includes(i)));
    },
    stop,
  };
}
