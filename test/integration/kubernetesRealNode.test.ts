/**
 * The Kubernetes sandbox provider on real pods: the throwaway control plane
 * (kubeCluster.ts, no kwok) plus one real node (kubeNode.ts: kubelet 1.36,
 * containerd, runc, CNI ptp in a network namespace of the test's), the image
 * built here for the image-task fixture pushed to a loopback registry and
 * pulled by the node, and the shared conformance suite run against it.
 *
 * Needs scripts/ensure-kube.sh (KUBE_BIN_DIR), scripts/ensure-kube-node.sh
 * (KUBE_NODE_BIN_DIR) and scripts/ensure-image-tools.sh (ROLLOUT_IMAGE_TOOLS);
 * skips naming the missing one.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { ensureTaskImage } from '../../images/taskImage.js';
import { KubernetesSandboxProvider } from '../../sandboxes/kubernetes/kubernetesSandboxProvider.js';
import { reapSandboxes } from '../../sandboxes/reaper/reapSandboxes.js';
import { temporalOwnerStatus } from '../../activities/reaper/temporalOwnerStatus.js';
import { loadTask } from '../../tasks/loadTask.js';
import type { SandboxHandle, SandboxSpec } from '../../shared/sandbox.js';
import { hostBait } from '../conformance/hostBait.js';
import { sandboxConformanceSuite } from '../conformance/sandboxConformance.js';
import { startKubeCluster, type KubeCluster } from '../helpers/kubeCluster.js';
import { kubeNodeBinDir, startKubeNode, type KubeNode } from '../helpers/kubeNode.js';
import { pushImage, startOciRegistry, type OciRegistry } from '../helpers/ociRegistry.js';
import { submitBatch } from '../../client/submitBatch.js';
import type { GroupResult } from '../../shared/pipeline.js';
import { runOneGroup, startHarness } from '../helpers/pipelineHarness.js';
import { startWorkerProcess, type WorkerProcess } from '../helpers/workerProcess.js';
import { connectClient, uniqueTaskQueue } from '../helpers/temporal.js';

const NAMESPACE = 'rollout-sandboxes';
const root = resolve(import.meta.dirname, '../..');
const nodeBins = kubeNodeBinDir();
const skip = !process.env.ROLLOUT_IMAGE_TOOLS
  ? 'needs image tools: run scripts/ensure-image-tools.sh and export the ROLLOUT_IMAGE_TOOLS it prints'
  : nodeBins.missing ?? false;

const scratch = mkdtempSync(join(tmpdir(), 'kube-real-node-'));
const bait = hostBait('kube-real-node', scratch);
let cluster: KubeCluster | undefined;
let node: KubeNode | undefined;
let registry: OciRegistry | undefined;
let provider: KubernetesSandboxProvider;
let core: CoreV1Api;
let imageRef = '';
let imageDigest = '';
/** Containers of each tracked pod, taken right after provision (they are gone from containerd after teardown). */
const tracked = new Map<string, string[]>();

before(async () => {
  if (skip) return;
  const { image } = await ensureTaskImage(loadTask(join(root, 'test/fixtures/image-task')));
  registry = await startOciRegistry();
  imageRef = `${registry.address}/rollout-task/image-task:${image.key.slice(0, 20)}`;
  imageDigest = pushImage(image.tag, imageRef);
  cluster = await startKubeCluster({ fakeNode: false });
  node = await startKubeNode(cluster, registry.address);
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  provider = new KubernetesSandboxProvider({ kubeConfig: cluster.kubeConfig, namespace: NAMESPACE, nodeName: node.name, createsPerSecond: 20, readyTimeoutMs: 120_000 });
  await bait.plant();
});

after(async () => {
  await bait.remove();
  await node?.stop();
  await cluster?.stop();
  await registry?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

function spec(overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  return { image: imageRef, environmentDir: scratch, workdir: '/app', owner: { workflowId: 'wf-real-node', runId: 'run-1', attempt: 0 }, labels: { suite: 'real-node' }, ...overrides };
}

function uidOf(h: SandboxHandle): string {
  return 'uid' in h ? h.uid : '';
}

sandboxConformanceSuite(
  'kubernetes (real node)',
  () => ({
    provider,
    spec,
    track: (h: SandboxHandle) => {
      tracked.set(h.id, node?.containersOf(uidOf(h)) ?? []);
    },
    leftovers: async (h: SandboxHandle) => {
      const uid = uidOf(h);
      const pod = await core.readNamespacedPod({ namespace: NAMESPACE, name: h.id }).then(() => [`pod ${h.id}`], () => []);
      // A stopped container's record stays in containerd until kubelet's garbage collection (every minute); checked below.
      const containers = (node?.runningContainersOf(uid) ?? []).map((c) => `running container ${c}`);
      return { processes: node?.processesOf(uid) ?? [], mounts: node?.mountsOf(uid, tracked.get(h.id) ?? []) ?? [], directories: [], other: [...pod, ...containers] };
    },
    secrets: { files: bait.secretFiles, envValue: bait.secretValue, hostPaths: [scratch, '/work', '/var/lib/rollout-pipeline'] },
    hostPorts: [],
  }),
  {
    skip,
    notApplicable: {
      'background processes:':
        "a CRI exec ends only when every holder of its output stream has closed it: a background process that keeps the exec's stdout holds the exec until its timeout (measured here: 151 s for the 120 s default), where the local provider returns after 100 ms idle and drains the pipe; on Kubernetes an agent redirects a background process's output (docs/sandbox.md)",
      'escape: no network beyond': 'a pod has its pod network (here CNI ptp into a network namespace of the test, with no way out); egress is the deny-all NetworkPolicy of deploy/, which needs a CNI that enforces NetworkPolicy: none is built here, so egress denial is unchecked',
      'network public:': 'the test node’s pod network (CNI ptp into a network namespace of the test) has no way out by design, and no CNI here enforces the egress=allow NetworkPolicy; user-mode networking is the local provider’s',
      'escape: writes outside the workspace': "a container's root filesystem is its own writable layer, discarded with the pod (the provider sets no readOnlyRootFilesystem); writes there never reach the host",
      'escape: a fork bomb': "Kubernetes has no per-pod pids limit in the Pod spec (kubelet's podPidsLimit is per node; the provider reports pids not-enforced)",
      'the writable layer is bounded': 'ephemeral-storage is enforced by kubelet eviction after the fact, not as ENOSPC',
      '200 provision/teardown cycles': 'each real pod takes seconds to start; provision/teardown cycles run in the pacing measurement instead',
    },
  },
);

describe('kubernetes sandbox provider on a real node', { timeout: 600_000, skip }, () => {
  test('the node pulled the image built for the task from the loopback registry: the pod runs it by digest', async () => {
    assert.match(imageDigest, /^sha256:[0-9a-f]{64}$/);
    const { handle, image } = await provider.provision(spec());
    try {
      assert.deepEqual(image, { reference: imageRef, digest: imageDigest }, 'provision reports the image by digest (it goes into the experiment record)');
      const pod = await core.readNamespacedPod({ namespace: NAMESPACE, name: handle.id });
      const status = pod.status?.containerStatuses?.[0];
      assert.equal(status?.image, imageRef);
      assert.equal(status?.imageID, `${imageRef.replace(/:[^:/]+$/, '')}@${imageDigest}`, 'the node runs exactly the pushed manifest');
      const r = await provider.exec(handle, 'cat /app/start.txt; echo "$ROLLOUT_IMAGE_MARKER"; cat /proc/1/cgroup | head -1');
      assert.equal(r.exitCode, 0, r.stderr);
      assert.match(r.stdout, /^hello\nfrom-the-image\n/, 'the starting files and ENV of the built image');
    } finally {
      await provider.teardown(handle);
    }
  });

  test('a batch through the pipeline on real pods: scripted:oracle scores 1, the experiment record names docker_image and its digest', async () => {
    // A task whose image is the one pushed above; its verifier is plain shell (the fixture's own needs uv from the internet).
    const taskDir = join(scratch, 'kube-task');
    for (const d of ['environment', 'solution', 'tests']) mkdirSync(join(taskDir, d), { recursive: true });
    writeFileSync(join(taskDir, 'task.toml'), `version = "1.0"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 60.0\n\n[environment]\ndocker_image = "${imageRef}"\nmemory = "512M"\n`);
    writeFileSync(join(taskDir, 'instruction.md'), 'Write "done" to /app/result.txt.\n');
    writeFileSync(join(taskDir, 'solution', 'solve.sh'), '#!/bin/bash\necho done > /app/result.txt\n');
    writeFileSync(join(taskDir, 'tests', 'test.sh'), '#!/bin/bash\nmkdir -p /logs/verifier\nif [ "$(cat /app/result.txt)" = done ] && [ -f /app/start.txt ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n');
    const h = await startHarness('kube-real-node');
    try {
      await h.startWorkers({ provider });
      const group = await runOneGroup(h, 'kube-real-node', { tasks: [taskDir], groupSize: 2, policy: { kind: 'scripted', script: 'oracle' } });
      assert.equal(group.status, 'complete', `${group.statusReason}: ${JSON.stringify(group.rollouts.map((r) => [r.outcomeClass, r.outcomeType, r.attemptHistory.map((a) => a.message)]))}`);
      for (const r of group.rollouts) {
        assert.equal(r.reward, 1, `${r.index}: ${r.outcomeClass}/${r.outcomeType} ${r.attemptHistory.map((a) => a.message).join(' | ')}`);
        assert.equal(r.experiment?.sandboxProvider, 'kubernetes');
        assert.ok(r.experiment?.environmentIdentity.endsWith(`; image ${imageRef} = ${imageDigest}`), r.experiment?.environmentIdentity);
      }
      assert.deepEqual(await provider.list({ batch: group.batchId }), [], 'every rollout tore its pod down');
    } finally {
      await h.close();
    }
  });

  test('`rollout worker` with ROLLOUT_SANDBOX_PROVIDER=kubernetes, SIGKILLed mid-batch and replaced: every rollout still scores 1, and no pod of the batch is left', async () => {
    // The oracle's solve.sh sleeps, so the worker dies while the rollouts are in their tool call.
    const taskDir = join(scratch, 'kube-slow-task');
    for (const d of ['environment', 'solution', 'tests']) mkdirSync(join(taskDir, d), { recursive: true });
    writeFileSync(join(taskDir, 'task.toml'), `version = "1.0"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 120.0\n\n[environment]\ndocker_image = "${imageRef}"\nmemory = "256M"\ncpus = 0.2\n`);
    writeFileSync(join(taskDir, 'instruction.md'), 'Write "done" to /app/result.txt.\n');
    writeFileSync(join(taskDir, 'solution', 'solve.sh'), '#!/bin/bash\nsleep 8\necho done > /app/result.txt\n');
    writeFileSync(join(taskDir, 'tests', 'test.sh'), '#!/bin/bash\nif [ "$(cat /app/result.txt)" = done ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n');
    const prefix = uniqueTaskQueue('kube-real-kill');
    const workers: WorkerProcess[] = [];
    const startWorker = async (): Promise<WorkerProcess> => {
      const w = startWorkerProcess({
        queuePrefix: prefix,
        hostId: `${prefix}-host`,
        dataDir: join(scratch, 'kill', 'data'),
        sandboxRoot: join(scratch, 'kill', 'sandboxes'),
        env: { ROLLOUT_SANDBOX_PROVIDER: 'kubernetes', KUBECONFIG: cluster?.kubeconfigPath ?? '', ROLLOUT_SANDBOX_NAMESPACE: NAMESPACE },
      });
      workers.push(w);
      await w.ready;
      return w;
    };
    const { client, close } = await connectClient();
    try {
      const first = await startWorker();
      const batchId = `kube-real-kill-${Date.now()}`;
      const batch = await submitBatch(client, { batchId, tasks: [taskDir], groupSize: 2, policy: { kind: 'scripted', script: 'oracle' }, taskQueues: { main: prefix, policy: `${prefix}-policy` } });
      for (const deadline = Date.now() + 120_000; (await provider.list({ batch: batchId })).filter((r) => r.alive).length < 2; await new Promise((r) => setTimeout(r, 300))) {
        if (Date.now() > deadline) {
          const pods = (await core.listNamespacedPod({ namespace: NAMESPACE })).items.map((p) => `${p.metadata?.name} ${p.spec?.nodeName ?? 'unscheduled'} ${p.status?.phase} ${JSON.stringify(p.status?.conditions?.map((c) => c.message).filter(Boolean))}`);
          assert.fail(`both rollouts got a running pod within 120 s; pods: ${JSON.stringify(pods)}; worker: ${JSON.stringify(first.lines.filter((l) => Number(l.level) >= 40).slice(-5))} ${first.stderr().slice(-2000)}`);
        }
      }
      await new Promise((r) => setTimeout(r, 3_000)); // inside the oracle's sleep
      first.kill('SIGKILL');
      await first.exited;
      assert.equal((await provider.list({ batch: batchId })).filter((r) => r.alive).length, 2, 'the pods outlive their worker');
      await startWorker();
      const groups: GroupResult[] = [];
      for await (const g of batch.results()) groups.push(g);
      const rollouts = groups.flatMap((g) => g.rollouts);
      assert.deepEqual(rollouts.map((r) => r.reward), [1, 1], JSON.stringify(rollouts.map((r) => r.attemptHistory.map((a) => `${a.outcomeClass}/${a.outcomeType}: ${a.message}`))));
      for (const r of rollouts) assert.ok(r.experiment?.environmentIdentity.endsWith(`= ${imageDigest}`), r.experiment?.environmentIdentity);
      // Whatever the killed worker left (a pod of an attempt that was replaced) is the reaper's: its owner run is closed.
      await reapSandboxes(provider, temporalOwnerStatus(client), { dryRun: false });
      assert.deepEqual(await provider.list({ batch: batchId }), [], 'no pod of the batch is left');
    } finally {
      for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.kill('SIGKILL');
      await Promise.all(workers.map((w) => w.exited));
      await close();
    }
  });

  test('the reaper deletes the pod of a workflow that does not exist, by label, and keeps the pod of an open one', async () => {
    const { client, close } = await connectClient();
    const open = await client.workflow.start('rollout', { workflowId: `kube-real-reaper-open-${Date.now()}`, taskQueue: uniqueTaskQueue('kube-real-reaper-nobody'), args: [] });
    try {
      const orphan = await provider.provision(spec({ labels: { suite: 'real-reaper' }, owner: { workflowId: `kube-real-reaper-gone-${Date.now()}`, runId: '', attempt: 0 } }));
      const kept = await provider.provision(spec({ labels: { suite: 'real-reaper' }, owner: { workflowId: open.workflowId, runId: open.firstExecutionRunId, attempt: 0 } }));
      const orphanUid = uidOf(orphan.handle);
      const report = await reapSandboxes(provider, temporalOwnerStatus(client), { dryRun: false });
      assert.deepEqual(report.reaped.map((r) => r.id).filter((id) => [orphan.handle.id, kept.handle.id].includes(id)), [orphan.handle.id], JSON.stringify(report.errors));
      assert.deepEqual((await provider.list({ suite: 'real-reaper' })).map((r) => r.id), [kept.handle.id], 'the open run keeps its sandbox');
      assert.deepEqual([node?.runningContainersOf(orphanUid), node?.processesOf(orphanUid)], [[], []], 'nothing of the reaped pod runs on the node');
      await provider.teardown(kept.handle);
    } finally {
      await open.terminate('test done');
      await close();
    }
  });

  test('after every teardown, kubelet’s garbage collection leaves no container of any sandbox in containerd', async () => {
    assert.ok(tracked.size > 0, 'the conformance suite ran pods on this node');
    const pods = await core.listNamespacedPod({ namespace: NAMESPACE });
    assert.deepEqual(pods.items.map((p) => p.metadata?.name), [], 'no sandbox pod is left');
    let left: string[] = [];
    for (const deadline = Date.now() + 150_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 2_000))) {
      left = node?.allContainers() ?? [];
      if (left.length === 0) break;
    }
    assert.deepEqual(left, [], 'containerd holds no container 150 s after the last teardown (kubelet collects them every minute)');
  });
});
