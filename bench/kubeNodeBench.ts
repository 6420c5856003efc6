/**
 * `npm run bench:kube-node [-- --cycles N] [-- --burst N] [-- --rate R]`
 *
 * The Kubernetes sandbox provider on one real node (test/helpers/kubeNode.ts:
 * kubelet, containerd, runc; the image-task fixture's image from a loopback
 * registry): sequential provision → exec `true` × 20 → teardown cycles, then a
 * burst of pods created at once under the provider's creation pacing (pods/s
 * to Running). Needs scripts/ensure-kube.sh, scripts/ensure-kube-node.sh and
 * scripts/ensure-image-tools.sh. Prints percentiles; asserts nothing.
 */
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import { ensureTaskImage } from '../images/taskImage.js';
import { KubernetesSandboxProvider } from '../sandboxes/kubernetes/kubernetesSandboxProvider.js';
import { loadTask } from '../tasks/loadTask.js';
import type { SandboxSpec } from '../shared/sandbox.js';
import { summarize, type Summary } from '../shared/stats.js';
import { startKubeCluster } from '../test/helpers/kubeCluster.js';
import { startKubeNode } from '../test/helpers/kubeNode.js';
import { pushImage, startOciRegistry } from '../test/helpers/ociRegistry.js';
import { machineFacts } from './stats.js';

const { values } = parseArgs({ options: { cycles: { type: 'string', default: '10' }, burst: { type: 'string', default: '10' }, rate: { type: 'string', default: '10' } } });
const cycles = Number(values.cycles);
const burst = Number(values.burst);
const rate = Number(values.rate);
const root = resolve(import.meta.dirname, '..');
const NAMESPACE = 'rollout-sandboxes';

const { image } = await ensureTaskImage(loadTask(join(root, 'test/fixtures/image-task')));
const registry = await startOciRegistry();
const cluster = await startKubeCluster({ fakeNode: false });
try {
  const node = await startKubeNode(cluster, registry.address);
  try {
    const ref = `${registry.address}/rollout-task/image-task:${image.key.slice(0, 20)}`;
    pushImage(image.tag, ref);
    await cluster.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
    const provider = new KubernetesSandboxProvider({ kubeConfig: cluster.kubeConfig, namespace: NAMESPACE, nodeName: node.name, createsPerSecond: rate, readyTimeoutMs: 180_000 });
    // 0.1 CPU each: the node's allocatable CPU (2 here) caps how many sandboxes run at once.
    const spec = (cpus = 0.1): SandboxSpec => ({
      image: ref,
      environmentDir: root,
      workdir: '/app',
      limits: { memoryMb: 256, cpus },
      owner: { workflowId: 'bench', runId: 'r', attempt: 0 },
      labels: { bench: 'kube-node' },
    });

    // The first pod pulls the image (5 s here for 466 MB); it is not counted.
    const warm = await provider.provision(spec());
    await provider.teardown(warm.handle);

    const provisionMs: number[] = [];
    const execMs: number[] = [];
    const teardownMs: number[] = [];
    for (let i = 0; i < cycles; i++) {
      let t = performance.now();
      const { handle } = await provider.provision(spec());
      provisionMs.push(performance.now() - t);
      for (let j = 0; j < 20; j++) {
        t = performance.now();
        const r = await provider.exec(handle, 'true');
        if (r.exitCode !== 0) throw new Error(`exec true exited ${r.exitCode}: ${r.stderr}`);
        execMs.push(performance.now() - t);
      }
      t = performance.now();
      await provider.teardown(handle);
      teardownMs.push(performance.now() - t);
    }

    const started = performance.now();
    const toRunning: number[] = [];
    const handles = await Promise.all(
      Array.from({ length: burst }, async () => {
        const made = await provider.provision(spec());
        toRunning.push(performance.now() - started);
        return made.handle;
      }),
    );
    const burstMs = performance.now() - started;
    // One more, asking for more CPU than is left: the kubelet rejects it (the node's quota holds).
    const overCap = await provider.provision(spec(2)).then(
      async (made) => {
        await provider.teardown(made.handle);
        return 'admitted (unexpected)';
      },
      (err: unknown) => (err instanceof Error ? `${err.name}: ${err.message}` : String(err)),
    );
    const t = performance.now();
    await Promise.all(handles.map((h) => provider.teardown(h)));
    const burstTeardownMs = performance.now() - t;

    const row = (name: string, s: Summary): string => `| ${name} | ${s.n} | ${s.p50.toFixed(0)} | ${s.p95.toFixed(0)} | ${s.p99.toFixed(0)} |`;
    console.log('| operation (real node) | n | p50 ms | p95 ms | p99 ms |');
    console.log('|---|--:|--:|--:|--:|');
    console.log(row('provision (create → Running, image cached)', summarize(provisionMs)));
    console.log(row('exec `true` through pods/exec', summarize(execMs)));
    console.log(row('teardown (grace 1, until gone from the API)', summarize(teardownMs)));
    console.log(row(`burst of ${burst} at once: time to Running`, summarize(toRunning)));
    console.log('');
    console.log(
      `burst: ${burst} pods Running in ${(burstMs / 1000).toFixed(1)} s = ${(burst / (burstMs / 1000)).toFixed(2)} pods/s (pacing ${rate} creates/s); concurrent teardown of all ${burst} in ${(burstTeardownMs / 1000).toFixed(1)} s`,
    );
    console.log(`a pod asking 2 CPUs while ${burst} × 0.1 run: ${overCap}`);
    console.log(`machine: ${JSON.stringify(await machineFacts())}`);
  } finally {
    await node.stop();
  }
} finally {
  await cluster.stop();
  await registry.stop();
}
