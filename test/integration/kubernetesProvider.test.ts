/**
 * The Kubernetes sandbox provider against a real kube-apiserver (with etcd
 * and a kwok fake node; test/helpers/kubeCluster.ts): real Pod objects are
 * created, listed, exec'd into and deleted through the API. kwok runs exec'd
 * commands on this host, so the conformance cases about the pod's own
 * filesystem, processes and limits cannot apply here; they are listed with
 * the reason, and the cases that do apply run.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { PassThrough } from 'node:stream';
import { CoreV1Api, Exec, KubeConfig, type V1Status } from '@kubernetes/client-node';
import { reapSandboxes } from '../../sandboxes/reaper/reapSandboxes.js';
import { temporalOwnerStatus } from '../../activities/reaper/temporalOwnerStatus.js';
import { exitCodeOf } from '../../sandboxes/kubernetes/execStatus.js';
import { KubernetesSandboxProvider } from '../../sandboxes/kubernetes/kubernetesSandboxProvider.js';
import type { SandboxHandle, SandboxSpec } from '../../shared/sandbox.js';
import { sandboxConformanceSuite } from '../conformance/sandboxConformance.js';
import { FAKE_NODE, startKubeCluster, type KubeCluster } from '../helpers/kubeCluster.js';
import { connectClient, uniqueTaskQueue } from '../helpers/temporal.js';

const NAMESPACE = 'rollout-sandboxes';
const scratch = mkdtempSync(join(tmpdir(), 'kube-provider-'));
let cluster: KubeCluster;
let provider: KubernetesSandboxProvider;
let core: CoreV1Api;

before(async () => {
  cluster = await startKubeCluster();
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  provider = new KubernetesSandboxProvider({ kubeConfig: cluster.kubeConfig, namespace: NAMESPACE, nodeName: FAKE_NODE, defaultImage: 'busybox:1.36', createsPerSecond: 50, readyTimeoutMs: 30_000 });
});

after(async () => {
  await cluster.stop();
  rmSync(scratch, { recursive: true, force: true });
});

/** A spec whose workdir is a fresh directory under kwok's exec dir (kwok runs commands on this host). */
function spec(overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  const workdir = mkdtempSync(join(cluster.execDir, 'pod-'));
  return { environmentDir: scratch, workdir, owner: { workflowId: 'wf-kube', runId: 'run-1', attempt: 0 }, labels: { suite: 'kube' }, ...overrides };
}

const ON_HOST = 'kwok runs exec on the host, so there is no per-pod filesystem, process table or cgroup to check';
sandboxConformanceSuite(
  'kubernetes (kwok)',
  () => ({
    provider,
    spec,
    track: () => undefined,
    leftovers: async (h: SandboxHandle) => {
      const gone = await core.readNamespacedPod({ namespace: NAMESPACE, name: h.id }).then(() => false, () => true);
      return { processes: [], mounts: [], directories: [], other: gone ? [] : [`pod ${h.id}`] };
    },
    secrets: { files: [], envValue: 'unused', hostPaths: [] },
    hostPorts: [],
  }),
  {
    notApplicable: {
      'reset:': ON_HOST,
      'isolation:': ON_HOST,
      'background processes:': `${ON_HOST}; and a pod's exec is held open by any process that keeps its output stream (see the real node's reason)`,
      'network public:': `${ON_HOST}; in a real cluster the NetworkPolicy allows egress for a pod labelled egress=allow (checked below)`,
      'escape:': `${ON_HOST}; in a real cluster the pod's security context, the NetworkPolicy and the runtime class contain these (deploy/)`,
      'the writable layer is bounded': 'kwok enforces no ephemeral-storage limit (the provider sets it on the pod; checked below)',
      'exec options:': 'the case uses /app and /tmp, which under kwok are the host’s; the same options are checked below inside the pod’s workdir',
      'writeFile and readFile': 'the case writes /app and /logs, which under kwok are the host’s; checked below inside the pod’s workdir',
      'teardown is idempotent': 'the case leaves a setsid process, which under kwok would be a host process that no pod deletion stops; idempotent teardown is checked below',
      '200 provision/teardown cycles': 'the case writes /app on the host under kwok; 20 cycles run below',
    },
  },
);

describe('kubernetes sandbox provider', { timeout: 300_000 }, () => {
  test('a sandbox is a Pod with the owner, lease and egress labels, no service account token, all capabilities dropped and the task’s limits', async () => {
    const pinned = new KubernetesSandboxProvider({ kubeConfig: cluster.kubeConfig, namespace: NAMESPACE, nodeName: FAKE_NODE, defaultImage: 'busybox:1.36', runtimeClassName: undefined, nodeSelector: { 'rollout-pipeline/sandbox-node': 'true' } });
    const { handle, enforcedLimits } = await pinned.provision(spec({ image: 'python:3.12-slim', limits: { memoryMb: 512, cpus: 0.5, diskMb: 64 }, owner: { workflowId: 'rollout/b1/task-a/3', runId: 'run-9', attempt: 1 }, labels: { batch: 'b1', rollout: '3' } }));
    try {
      const pod = await core.readNamespacedPod({ namespace: NAMESPACE, name: handle.id });
      assert.equal(pod.spec?.automountServiceAccountToken, false);
      assert.equal(pod.spec?.enableServiceLinks, false);
      assert.equal(pod.spec?.restartPolicy, 'Never');
      assert.deepEqual(pod.spec?.nodeSelector, { 'rollout-pipeline/sandbox-node': 'true' });
      const c = pod.spec?.containers[0];
      assert.equal(c?.image, 'python:3.12-slim');
      assert.deepEqual(c?.securityContext?.capabilities?.drop, ['ALL']);
      assert.equal(c?.securityContext?.allowPrivilegeEscalation, false);
      assert.equal(pod.spec?.securityContext?.seccompProfile?.type, 'RuntimeDefault');
      assert.deepEqual(c?.resources?.limits, { memory: '512Mi', cpu: '500m', 'ephemeral-storage': '64Mi' });
      assert.deepEqual(enforcedLimits, { memory: 'pod-limits', cpu: 'pod-limits', disk: 'pod-limits', pids: 'not-requested' });
      assert.equal(pod.metadata?.labels?.['rollout-pipeline/egress'], 'deny');
      assert.equal(pod.metadata?.labels?.['rollout-pipeline/batch'], 'b1');
      assert.equal(pod.metadata?.annotations?.['rollout-pipeline/workflow-id'], 'rollout/b1/task-a/3');
      assert.equal(pod.metadata?.annotations?.['rollout-pipeline/attempt'], '1');
      assert.ok(Date.parse(pod.metadata?.annotations?.['rollout-pipeline/lease-expires-at'] ?? '') > Date.now());
      const open = await pinned.provision(spec({ network: 'host' }));
      assert.equal((await core.readNamespacedPod({ namespace: NAMESPACE, name: open.handle.id })).metadata?.labels?.['rollout-pipeline/egress'], 'allow', 'a task that allows internet opts out of the deny-all NetworkPolicy');
      await pinned.teardown(open.handle);
    } finally {
      await pinned.teardown(handle);
    }
  });

  test('exec through the API: exit codes, separate streams, stdin, env and cwd, inside the pod’s workdir', async () => {
    const { handle } = await provider.provision(spec());
    try {
      const r = await provider.exec(handle, 'mkdir -p sub && cd sub && echo out && echo err >&2 && cat && echo "$GREETING"; exit 7', { stdin: 'from-stdin\n', env: { GREETING: 'hi there' } });
      assert.deepEqual([r.exitCode, r.stdout, r.stderr, r.timedOut], [7, 'out\nfrom-stdin\nhi there\n', 'err\n', false]);
      const cwd = await provider.exec(handle, 'pwd', { cwd: `${handle.workdir}/sub` });
      assert.equal(cwd.stdout, `${handle.workdir}/sub\n`);
      assert.equal((await provider.exec(handle, 'true')).exitCode, 0);
    } finally {
      await provider.teardown(handle);
    }
  });

  test('files move through exec: binary round trip, a 300 KB file in chunks, size limit, missing file', async () => {
    const { handle } = await provider.provision(spec());
    try {
      const bytes = new Uint8Array([0, 1, 2, 255, 10, 13]);
      await provider.writeFile(handle, `${handle.workdir}/deep/dir/blob.bin`, bytes);
      assert.deepEqual(await provider.readFile(handle, `${handle.workdir}/deep/dir/blob.bin`), bytes);
      const big = Buffer.alloc(300_000, 'x');
      big.write('start', 0);
      big.write('end', big.length - 3);
      await provider.writeFile(handle, `${handle.workdir}/big.txt`, big);
      assert.ok(Buffer.from(await provider.readFile(handle, `${handle.workdir}/big.txt`)).equals(big));
      await assert.rejects(provider.readFile(handle, `${handle.workdir}/big.txt`, { maxBytes: 1000 }), /more than 1000 bytes/);
      await assert.rejects(provider.readFile(handle, `${handle.workdir}/missing`), /No such file/);
    } finally {
      await provider.teardown(handle);
    }
  });

  test('teardown deletes the pod, is idempotent and safe concurrently; 20 cycles leave no pod', async () => {
    const { handle } = await provider.provision(spec());
    const reports = await Promise.all([provider.teardown(handle), provider.teardown(handle), provider.teardown(handle.id)]);
    assert.ok(reports.some((r) => r.existed));
    assert.equal((await provider.teardown(handle)).existed, false);
    for (let i = 0; i < 20; i++) {
      const { handle: h } = await provider.provision(spec({ labels: { suite: 'cycles' } }));
      assert.equal((await provider.exec(h, `echo cycle-${i}`)).stdout, `cycle-${i}\n`);
      await provider.teardown(h);
    }
    assert.deepEqual(await provider.list({ suite: 'cycles' }), []);
  });

  test('a pod that never runs ends the attempt as infra/provision_timeout and is deleted', async () => {
    const stuck = new KubernetesSandboxProvider({ kubeConfig: cluster.kubeConfig, namespace: NAMESPACE, nodeName: 'no-such-node', defaultImage: 'busybox:1.36', readyTimeoutMs: 2_000 });
    await assert.rejects(stuck.provision(spec({ labels: { suite: 'stuck' } })), (err: Error) => err.name === 'infra/provision_timeout' && /not Running after 2 s \(phase Pending/.test(err.message));
    assert.deepEqual(await provider.list({ suite: 'stuck' }), [], 'the stuck pod was deleted');
  });

  test('a namespace at its ResourceQuota is capacity (infra/provision_failed, retried), not a missing permission', async () => {
    const namespace = 'rollout-sandboxes-quota';
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await core.createNamespacedResourceQuota({ namespace, body: { metadata: { name: 'sandbox-pods' }, spec: { hard: { pods: '0' } } } });
    // No controller-manager here to compute the quota's usage: set the status it would.
    await core.replaceNamespacedResourceQuotaStatus({ namespace, name: 'sandbox-pods', body: { metadata: { name: 'sandbox-pods' }, spec: { hard: { pods: '0' } }, status: { hard: { pods: '0' }, used: { pods: '0' } } } });
    const full = new KubernetesSandboxProvider({ kubeConfig: cluster.kubeConfig, namespace, nodeName: FAKE_NODE, defaultImage: 'busybox:1.36', createsPerSecond: 50, readyTimeoutMs: 30_000 });
    await assert.rejects(full.provision(spec({ labels: { suite: 'quota' } })), (err: Error) => {
      assert.equal(err.name, 'infra/provision_failed', err.message);
      assert.match(err.message, /is at its ResourceQuota \(exceeded quota: sandbox-pods, requested: pods=1/);
      assert.match(err.message, /raise the quota or lower the batch's concurrency/);
      return true;
    });
    assert.deepEqual(await full.list({ suite: 'quota' }), []);
  });

  test('a task without an image is a task error naming the field', async () => {
    const noDefault = new KubernetesSandboxProvider({ kubeConfig: cluster.kubeConfig, namespace: NAMESPACE, nodeName: FAKE_NODE });
    await assert.rejects(noDefault.provision(spec()), (err: Error) => err.name === 'task/invalid_spec' && /\[environment\]\.docker_image/.test(err.message));
  });

  test('creation is paced and retried on 429 (with Retry-After) and 5xx from the API server', async () => {
    // A fault injector in front of the real API server: the first two pod creations get 429, the next one 503.
    let creates = 0;
    const createTimes: number[] = [];
    const apiUrl = new URL(cluster.server);
    const proxy: Server = createServer((req, res) => {
      const isCreate = req.method === 'POST' && /\/pods$/.test(req.url ?? '');
      if (isCreate) {
        creates++;
        createTimes.push(Date.now());
        if (creates <= 2) return void res.writeHead(429, { 'retry-after': '1', 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', status: 'Failure', code: 429, reason: 'TooManyRequests' }));
        if (creates === 3) return void res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', status: 'Failure', code: 503 }));
      }
      const upstream = httpsRequest({ host: apiUrl.hostname, port: apiUrl.port, method: req.method, path: req.url, headers: { ...req.headers, host: apiUrl.host }, ca: cluster.caCert }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      req.pipe(upstream);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const port = (proxy.address() as { port: number }).port;
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'proxy', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: 'admin', token: cluster.adminToken }],
      contexts: [{ name: 'proxy', cluster: 'proxy', user: 'admin' }],
      currentContext: 'proxy',
    });
    try {
      const paced = new KubernetesSandboxProvider({ kubeConfig: kc, namespace: NAMESPACE, nodeName: FAKE_NODE, defaultImage: 'busybox:1.36', createsPerSecond: 2 });
      const { handle } = await paced.provision(spec({ labels: { suite: 'paced' } }));
      assert.equal(creates, 4, 'two 429s and a 503 retried, the fourth create went through');
      assert.ok((createTimes[1] ?? 0) - (createTimes[0] ?? 0) >= 1_000, 'Retry-After: 1 was honoured');
      await paced.teardown(handle);
      const before = creates;
      const started = Date.now();
      const handles = await Promise.all([0, 1, 2, 3].map(() => paced.provision(spec({ labels: { suite: 'paced' } }))));
      assert.equal(creates - before, 4);
      assert.ok(Date.now() - started >= 1_400, 'four creations at 2 per second take at least 1.5 s of spacing');
      await Promise.all(handles.map((h) => paced.teardown(h.handle)));
    } finally {
      await new Promise<void>((r) => proxy.close(() => r()));
    }
  });

  test('the reaper finds orphaned sandbox pods by label selector and deletes them through the provider', async () => {
    // Owners are real workflow runs on the test's Temporal dev server: one open (no worker polls its queue), one that never existed.
    const { client, close } = await connectClient();
    const open = await client.workflow.start('rollout', { workflowId: `kube-reaper-open-${Date.now()}`, taskQueue: uniqueTaskQueue('kube-reaper-nobody'), args: [] });
    try {
      const orphan = await provider.provision(spec({ labels: { suite: 'reaper' }, owner: { workflowId: `kube-reaper-gone-${Date.now()}`, runId: '', attempt: 0 } }));
      const kept = await provider.provision(spec({ labels: { suite: 'reaper' }, owner: { workflowId: open.workflowId, runId: open.firstExecutionRunId, attempt: 0 } }));
      const report = await reapSandboxes(provider, temporalOwnerStatus(client), { dryRun: false });
      assert.deepEqual(report.reaped.map((r) => r.id).filter((id) => [orphan.handle.id, kept.handle.id].includes(id)), [orphan.handle.id], JSON.stringify(report.errors));
      assert.deepEqual((await provider.list({ suite: 'reaper' })).map((r) => r.id), [kept.handle.id], 'the open run keeps its sandbox');
      await provider.teardown(kept.handle);
    } finally {
      await open.terminate('test done');
      await close();
    }
  });

  test('known limit: kwok reports a non-zero exit as InternalError "exit status N", not NonZeroExitCode; both forms parse', async () => {
    const { handle } = await provider.provision(spec());
    try {
      const status = await new Promise<V1Status>((resolve, reject) => {
        new Exec(cluster.kubeConfig).exec(NAMESPACE, handle.id, 'sandbox', ['sh', '-c', 'exit 42'], new PassThrough(), new PassThrough(), null, false, resolve).catch(reject);
      });
      assert.equal(status.reason, 'InternalError');
      assert.match(status.message ?? '', /exit status 42\s*$/);
      assert.equal(exitCodeOf(status), 42);
      // What a real kubelet sends (k8s.io/cri-streaming ServeExec):
      assert.equal(exitCodeOf({ status: 'Failure', reason: 'NonZeroExitCode', message: 'command terminated with non-zero exit code: exit status 3', details: { causes: [{ reason: 'ExitCode', message: '3' }] } }), 3);
      assert.equal(exitCodeOf({ status: 'Success' }), 0);
      assert.equal(exitCodeOf({ status: 'Failure', reason: 'InternalError', message: 'cmd start: fork/exec /x: no such file or directory' }), undefined);
    } finally {
      await provider.teardown(handle);
    }
  });
});

