/**
 * deploy/: the Kubernetes manifests against a real API server (etcd and
 * kube-apiserver with RBAC and Pod Security admission, test/helpers/kubeCluster.ts),
 * and the checks of the worker image that need no Docker.
 *
 * What a real cluster would add and this cannot show: image pulls, probes
 * actually passing, NetworkPolicy enforcement (kwok has no pod network), and
 * the Deployment's controller creating pods (no kube-controller-manager here).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import https from 'node:https';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import {
  AuthorizationV1Api,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  loadAllYaml,
  PatchStrategy,
  type KubernetesObject,
  type V1ConfigMap,
  type V1Deployment,
  type V1NetworkPolicy,
  type V1Pod,
  type V1RoleBinding,
  type V1Secret,
  type V1ServiceAccount,
} from '@kubernetes/client-node';
import { startKubeCluster, type KubeCluster } from '../helpers/kubeCluster.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const deployDir = join(root, 'deploy');
const manifestDir = join(deployDir, 'kubernetes');
/** The source folders the worker runs: the runtime stage of deploy/Dockerfile copies each. */
const RUNTIME_DIRS = ['shared', 'sandboxes', 'tasks', 'stores', 'policies', 'verifier', 'images', 'agent', 'harnesses', 'resume', 'activities', 'workflows', 'servers', 'workers', 'cluster', 'client'];

const WORKER_NAMESPACE = 'rollout-pipeline';
const SANDBOX_NAMESPACE = 'rollout-sandboxes';
const SERVICE_ACCOUNT = 'rollout-worker';
const SA_USER = `system:serviceaccount:${WORKER_NAMESPACE}:${SERVICE_ACCOUNT}`;
const SA_GROUPS = ['system:serviceaccounts', `system:serviceaccounts:${WORKER_NAMESPACE}`, 'system:authenticated'];
const FIELD_MANAGER = 'rollout-deploy-test';

interface Manifest {
  file: string;
  /** This document's YAML text, as written (for the strict server-side check). */
  text: string;
  object: KubernetesObject;
}

/** Every YAML file of deploy/kubernetes except the kustomization itself. */
function manifestFiles(): string[] {
  return readdirSync(manifestDir)
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .sort();
}

function loadManifests(): Manifest[] {
  const out: Manifest[] = [];
  for (const file of manifestFiles()) {
    for (const text of readFileSync(join(manifestDir, file), 'utf8').split(/^---[ \t]*$/m)) {
      const objects = (loadAllYaml(text) as (KubernetesObject | null | undefined)[]).filter((o): o is KubernetesObject => Boolean(o));
      if (objects.length === 0) continue; // comments only
      assert.equal(objects.length, 1, `${file}: one object per document`);
      out.push({ file, text, object: objects[0] as KubernetesObject });
    }
  }
  return out;
}

const manifests = loadManifests();

function find<T extends KubernetesObject>(kind: string, name: string): T {
  const found = manifests.filter((m) => m.object.kind === kind && m.object.metadata?.name === name);
  assert.equal(found.length, 1, `exactly one ${kind} ${name} in deploy/kubernetes (found ${found.length})`);
  return (found[0] as Manifest).object as T;
}

function describeObject(o: KubernetesObject): string {
  return `${o.kind} ${o.metadata?.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata?.name}`;
}

/** KubernetesObjectApi, with its resource discovery (URL of an object) made usable for raw requests. */
class ManifestApi extends KubernetesObjectApi {
  async pathOf(spec: KubernetesObject): Promise<string> {
    return this.specUriPath(spec, 'patch');
  }
}

interface RawResponse {
  status: number;
  body: string;
  warnings: string[];
}

async function rawRequest(kc: KubeConfig, method: string, path: string, body: string, contentType: string): Promise<RawResponse> {
  const server = new URL(kc.getCurrentCluster()?.server ?? assert.fail('no cluster in the kubeconfig'));
  const options: https.RequestOptions = { method, hostname: server.hostname, port: server.port, path };
  await kc.applyToHTTPSOptions(options);
  options.headers = { ...options.headers, 'Content-Type': contentType, Accept: 'application/json' };
  return new Promise((resolvePromise, reject) => {
    const req = https.request(options, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        const warning = res.headers.warning;
        resolvePromise({ status: res.statusCode ?? 0, body: text, warnings: warning === undefined ? [] : Array.isArray(warning) ? warning : [warning] });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Server-side apply of a document's own YAML text, dry run, with strict field
 * validation: a misspelled or misplaced field is an error, not silently dropped
 * (loadAllYaml + KubernetesObjectApi serialize through the typed models, which
 * drop unknown fields before the server sees them).
 */
async function strictApplyDryRun(kc: KubeConfig, api: ManifestApi, m: { text: string; object: KubernetesObject }): Promise<RawResponse> {
  const path = `${await api.pathOf(m.object)}?dryRun=All&fieldManager=${FIELD_MANAGER}&fieldValidation=Strict&force=true`;
  return rawRequest(kc, 'PATCH', path, m.text, 'application/apply-patch+yaml');
}

/** A Pod the way the Kubernetes sandbox provider makes them (its contract with these manifests). */
function sandboxPod(name: string, egress: 'deny' | 'allow'): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: SANDBOX_NAMESPACE,
      labels: { 'app.kubernetes.io/managed-by': 'rollout-pipeline', 'rollout-pipeline/sandbox': 'true', 'rollout-pipeline/egress': egress },
    },
    spec: {
      automountServiceAccountToken: false,
      restartPolicy: 'Never',
      containers: [
        {
          name: 'sandbox',
          image: 'python:3.12-slim',
          command: ['sleep', 'infinity'],
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } },
        },
      ],
    },
  };
}

/** The API server's own message of a failed client-node call (its Status body), else the error's message. */
function errorText(err: unknown): string {
  if (err && typeof err === 'object' && 'body' in err) {
    const code = String((err as { code?: unknown }).code);
    try {
      const status = JSON.parse(String(err.body)) as { message?: string };
      return `${code} ${status.message ?? String(err.body)}`;
    } catch {
      return `${code} ${String(err.body)}`;
    }
  }
  return err instanceof Error ? err.message : String(err);
}

describe('deploy/kubernetes manifests on a real API server', { timeout: 180_000 }, () => {
  let cluster: KubeCluster;
  let objects: ManifestApi;

  before(async () => {
    // No Kubernetes binaries is a failure naming the command that builds them, never a skip.
    cluster = await startKubeCluster();
    objects = cluster.kubeConfig.makeApiClient(ManifestApi);
    // Namespaced objects need their namespaces to exist, even for a dry run.
    for (const m of manifests.filter((x) => x.object.kind === 'Namespace')) await objects.create(m.object);
  });

  after(async () => {
    await cluster?.stop();
  });

  test('every manifest applies with a server-side dry run (loadAllYaml + KubernetesObjectApi)', async () => {
    for (const m of manifests) {
      await objects.patch(m.object, undefined, 'All', FIELD_MANAGER, true, PatchStrategy.ServerSideApply).catch((err: unknown) => {
        assert.fail(`${m.file}: ${describeObject(m.object)} was refused: ${errorText(err)}`);
      });
    }
  });

  test('every manifest passes strict field validation, with no warnings (Pod Security included)', async () => {
    for (const m of manifests) {
      const res = await strictApplyDryRun(cluster.kubeConfig, objects, m);
      assert.ok(res.status === 200 || res.status === 201, `${m.file}: ${describeObject(m.object)}: HTTP ${res.status} ${res.body}`);
      // For a Deployment, Pod Security admission warns here when the pod template would violate its namespace's level.
      assert.deepEqual(res.warnings, [], `${m.file}: ${describeObject(m.object)}: warnings`);
    }
  });

  test('the strict check does catch a misspelled field', async () => {
    const m = manifests.find((x) => x.object.kind === 'Deployment') ?? assert.fail('no Deployment');
    const res = await strictApplyDryRun(cluster.kubeConfig, objects, { ...m, text: m.text.replace('readinessProbe:', 'readinesProbe:') });
    assert.ok(res.status >= 400, `expected a refusal, got HTTP ${res.status}`);
    // Server-side apply words it "field not declared in schema"; create/update say "unknown field".
    assert.match(res.body, /readinesProbe: field not declared in schema|unknown field "[^"]*readinesProbe"/);
  });

  test('the worker pod template is admitted under the restricted Pod Security level of its namespace', async () => {
    const deployment = find<V1Deployment>('Deployment', 'rollout-worker');
    const template = deployment.spec?.template ?? assert.fail('no pod template');
    const pod: V1Pod = { apiVersion: 'v1', kind: 'Pod', metadata: { ...template.metadata, name: 'worker-template-check', namespace: WORKER_NAMESPACE }, spec: template.spec };
    await objects.create(pod, undefined, 'All').catch((err: unknown) => assert.fail(`worker pod refused: ${errorText(err)}`));
    // ...and that level is really enforced here: the same pod running as root is refused.
    const asRoot: V1Pod = { ...pod, spec: { ...pod.spec, containers: pod.spec?.containers ?? [], securityContext: { ...pod.spec?.securityContext, runAsNonRoot: false, runAsUser: 0 } } };
    await assert.rejects(objects.create(asRoot, undefined, 'All'), (err: unknown) => /violates PodSecurity "restricted/.test(errorText(err)));
  });

  describe('RBAC of the rollout-worker ServiceAccount', () => {
    let authz: AuthorizationV1Api;

    before(async () => {
      authz = cluster.kubeConfig.makeApiClient(AuthorizationV1Api);
      for (const m of manifests.filter((x) => ['ServiceAccount', 'Role', 'RoleBinding'].includes(x.object.kind ?? ''))) {
        await objects.create(m.object);
      }
    });

    async function allowed(attrs: { verb: string; resource: string; subresource?: string; group?: string; namespace?: string }): Promise<boolean> {
      const review = await authz.createSubjectAccessReview({
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: { user: SA_USER, groups: SA_GROUPS, resourceAttributes: { group: attrs.group ?? '', ...attrs } },
        },
      });
      return review.status?.allowed === true;
    }

    const ALL_VERBS = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'];

    test('on pods and pods/exec in the sandbox namespace: exactly the verbs the provider uses', async () => {
      const podVerbs: string[] = [];
      const execVerbs: string[] = [];
      for (const verb of ALL_VERBS) {
        if (await allowed({ verb, resource: 'pods', namespace: SANDBOX_NAMESPACE })) podVerbs.push(verb);
        if (await allowed({ verb, resource: 'pods', subresource: 'exec', namespace: SANDBOX_NAMESPACE })) execVerbs.push(verb);
      }
      assert.deepEqual(podVerbs.sort(), ['create', 'delete', 'get', 'list', 'patch']);
      assert.deepEqual(execVerbs.sort(), ['create', 'get']);
    });

    test('everything else is denied', async () => {
      const denied: { verb: string; resource: string; subresource?: string; group?: string; namespace?: string }[] = [
        { verb: 'watch', resource: 'pods', namespace: SANDBOX_NAMESPACE },
        { verb: '*', resource: 'pods', namespace: SANDBOX_NAMESPACE },
        { verb: 'get', resource: 'secrets', namespace: SANDBOX_NAMESPACE },
        { verb: 'list', resource: 'secrets', namespace: SANDBOX_NAMESPACE },
        { verb: 'list', resource: 'secrets', namespace: WORKER_NAMESPACE },
        { verb: 'get', resource: 'pods', namespace: WORKER_NAMESPACE },
        { verb: 'create', resource: 'pods', namespace: 'default' },
        { verb: 'list', resource: 'pods', namespace: 'kube-system' },
        { verb: 'list', resource: 'pods' }, // all namespaces
        { verb: 'list', resource: 'nodes' },
        { verb: 'create', resource: 'networkpolicies', group: 'networking.k8s.io', namespace: SANDBOX_NAMESPACE },
        { verb: 'get', resource: 'pods', subresource: 'log', namespace: SANDBOX_NAMESPACE },
        { verb: 'create', resource: 'pods', subresource: 'attach', namespace: SANDBOX_NAMESPACE },
        { verb: 'create', resource: 'pods', subresource: 'portforward', namespace: SANDBOX_NAMESPACE },
        { verb: 'patch', resource: 'pods', subresource: 'ephemeralcontainers', namespace: SANDBOX_NAMESPACE },
        { verb: 'create', resource: 'pods', subresource: 'exec', namespace: WORKER_NAMESPACE },
        { verb: 'create', resource: 'deployments', group: 'apps', namespace: SANDBOX_NAMESPACE },
        { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: SANDBOX_NAMESPACE },
        { verb: 'get', resource: 'configmaps', namespace: WORKER_NAMESPACE },
        { verb: 'create', resource: 'rolebindings', group: 'rbac.authorization.k8s.io', namespace: SANDBOX_NAMESPACE },
      ];
      const wronglyAllowed: string[] = [];
      for (const attrs of denied) {
        if (await allowed(attrs)) wronglyAllowed.push(JSON.stringify(attrs));
      }
      assert.deepEqual(wronglyAllowed, []);
    });

    test("with the ServiceAccount's own token: a sandbox pod is admitted, a privileged one and other requests are not", async () => {
      const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
      const { status } = await core.createNamespacedServiceAccountToken({ name: SERVICE_ACCOUNT, namespace: WORKER_NAMESPACE, body: { spec: { audiences: [], expirationSeconds: 600 } } });
      const token = status?.token ?? assert.fail('no token');
      const caFile = cluster.kubeConfig.getCurrentCluster()?.caFile;
      const sa = new KubeConfig();
      sa.loadFromOptions({
        clusters: [{ name: 'test', server: cluster.server, ...(caFile ? { caFile } : {}), skipTLSVerify: false }],
        users: [{ name: 'worker', token }],
        contexts: [{ name: 'worker', cluster: 'test', user: 'worker' }],
        currentContext: 'worker',
      });
      const asWorker = sa.makeApiClient(CoreV1Api);
      const asWorkerObjects = sa.makeApiClient(KubernetesObjectApi);

      await asWorker.listNamespacedPod({ namespace: SANDBOX_NAMESPACE });
      for (const egress of ['deny', 'allow'] as const) {
        await asWorkerObjects.create(sandboxPod(`sandbox-${egress}`, egress), undefined, 'All').catch((err: unknown) => assert.fail(`sandbox pod (egress ${egress}) refused: ${errorText(err)}`));
      }
      // The namespace's baseline Pod Security level refuses what a misused token might try:
      // the node's filesystem, the node's network. (Privileged containers are refused even
      // before that here: the API server runs without --allow-privileged.)
      const escape = sandboxPod('sandbox-escape', 'deny');
      const container = escape.spec?.containers[0] ?? assert.fail('no container');
      container.volumeMounts = [{ name: 'host', mountPath: '/host' }];
      escape.spec = { ...escape.spec, containers: [container], hostNetwork: true, volumes: [{ name: 'host', hostPath: { path: '/' } }] };
      await assert.rejects(asWorkerObjects.create(escape, undefined, 'All'), (err: unknown) => /violates PodSecurity "baseline.*host namespaces.*hostPath volumes/s.test(errorText(err)));

      const forbidden = (err: unknown): boolean => (err as { code?: number }).code === 403;
      await assert.rejects(asWorker.listNamespacedSecret({ namespace: SANDBOX_NAMESPACE }), forbidden);
      await assert.rejects(asWorker.listNamespacedPod({ namespace: WORKER_NAMESPACE }), forbidden);
      // (timeoutSeconds: were watch allowed, the server would end the stream instead of the test hanging)
      await assert.rejects(asWorker.listNamespacedPod({ namespace: SANDBOX_NAMESPACE, watch: true, timeoutSeconds: 1 }), forbidden);
      await assert.rejects(asWorker.listNode(), forbidden);
    });
  });
});

describe('deploy/kubernetes: the pieces refer to each other correctly', () => {
  const deployment = find<V1Deployment>('Deployment', 'rollout-worker');
  const podSpec = deployment.spec?.template.spec ?? assert.fail('no pod spec');
  const container = podSpec.containers.find((c) => c.name === 'worker') ?? assert.fail('no worker container');
  const env = container.env ?? [];

  test('the kustomization lists every manifest but the example Secret', () => {
    const kustomization = loadAllYaml(readFileSync(join(manifestDir, 'kustomization.yaml'), 'utf8'))[0] as { resources?: string[] };
    const expected = manifestFiles().filter((f) => !f.endsWith('.example.yaml'));
    assert.deepEqual([...(kustomization.resources ?? [])].sort(), expected);
  });

  test('every ConfigMap and Secret key the worker reads exists in the manifests', () => {
    const references: string[] = [];
    for (const e of env) {
      const cm = e.valueFrom?.configMapKeyRef;
      const secret = e.valueFrom?.secretKeyRef;
      if (cm) {
        const data = find<V1ConfigMap>('ConfigMap', cm.name ?? '').data ?? {};
        assert.ok(cm.key in data, `env ${e.name}: ConfigMap ${cm.name} has no key ${cm.key}`);
        references.push(`configmap:${cm.name}/${cm.key}`);
      }
      if (secret) {
        const s = find<V1Secret>('Secret', secret.name ?? '');
        assert.ok(secret.key in { ...s.data, ...s.stringData }, `env ${e.name}: Secret ${secret.name} has no key ${secret.key}`);
        references.push(`secret:${secret.name}/${secret.key}`);
      }
    }
    for (const name of ['TEMPORAL_ADDRESS', 'ROLLOUT_SANDBOX_PROVIDER', 'ROLLOUT_SANDBOX_NAMESPACE']) {
      assert.ok(env.find((e) => e.name === name)?.valueFrom?.configMapKeyRef, `${name} comes from the ConfigMap`);
    }
    assert.ok(env.find((e) => e.name === 'ROLLOUT_STORE')?.valueFrom?.secretKeyRef, 'ROLLOUT_STORE comes from a Secret');
    assert.ok(references.length >= 4, references.join(', '));
    // Every ConfigMap and Secret of the worker's namespace is in the same namespace as the Deployment.
    for (const ref of [...new Set(env.map((e) => e.valueFrom?.configMapKeyRef?.name ?? e.valueFrom?.secretKeyRef?.name).filter(Boolean))]) {
      const m = manifests.find((x) => x.object.metadata?.name === ref && (x.object.kind === 'ConfigMap' || x.object.kind === 'Secret'));
      assert.equal(m?.object.metadata?.namespace, deployment.metadata?.namespace, `${ref} is in the Deployment's namespace`);
    }
  });

  test('the sandbox settings agree with the RBAC, the NetworkPolicy and the provider contract', () => {
    const config = find<V1ConfigMap>('ConfigMap', 'rollout-worker-config').data ?? {};
    assert.equal(config.ROLLOUT_SANDBOX_PROVIDER, 'kubernetes');
    assert.equal(config.ROLLOUT_SANDBOX_NAMESPACE, SANDBOX_NAMESPACE);
    assert.equal(podSpec.serviceAccountName, SERVICE_ACCOUNT);
    assert.equal(find<V1ServiceAccount>('ServiceAccount', SERVICE_ACCOUNT).metadata?.namespace, deployment.metadata?.namespace);
    const binding = find<V1RoleBinding>('RoleBinding', 'rollout-worker-sandbox-manager');
    assert.equal(binding.metadata?.namespace, SANDBOX_NAMESPACE);
    assert.deepEqual(
      binding.subjects?.map((x) => ({ kind: x.kind, name: x.name, namespace: x.namespace })),
      [{ kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace: WORKER_NAMESPACE }],
    );

    const policy = find<V1NetworkPolicy>('NetworkPolicy', 'sandbox-egress-deny');
    assert.equal(policy.metadata?.namespace, SANDBOX_NAMESPACE);
    assert.deepEqual([...(policy.spec?.policyTypes ?? [])].sort(), ['Egress', 'Ingress']);
    assert.equal(policy.spec?.egress, undefined, 'no egress rule: nothing allowed');
    assert.equal(policy.spec?.ingress, undefined, 'no ingress rule: nothing allowed');
    const selector = policy.spec?.podSelector ?? assert.fail('no podSelector');
    const selects = (labels: Record<string, string>): boolean =>
      Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v) && (selector.matchExpressions ?? []).length === 0;
    assert.ok(selects(sandboxPod('x', 'deny').metadata?.labels ?? {}), 'selects egress: deny sandboxes');
    assert.ok(!selects(sandboxPod('x', 'allow').metadata?.labels ?? {}), 'leaves egress: allow sandboxes alone');
  });

  test('metrics: --metrics on the named port the probes and the scrape annotations use', () => {
    const args = container.args ?? [];
    const i = args.indexOf('--metrics');
    assert.ok(i >= 0, `args include --metrics: ${args.join(' ')}`);
    assert.equal(args[i + 1], '0.0.0.0:9464');
    assert.equal(args[0], 'worker');
    const port = container.ports?.find((p) => p.name === 'metrics');
    assert.equal(port?.containerPort, 9464);
    for (const [name, probe] of Object.entries({ startup: container.startupProbe, readiness: container.readinessProbe, liveness: container.livenessProbe })) {
      assert.ok(probe, `${name} probe`);
      assert.equal(probe.httpGet?.port ?? probe.tcpSocket?.port, 'metrics', `${name} probe targets the metrics port`);
    }
    const annotations = deployment.spec?.template.metadata?.annotations ?? {};
    assert.equal(annotations['prometheus.io/scrape'], 'true');
    assert.equal(annotations['prometheus.io/port'], '9464');
    assert.equal(annotations['prometheus.io/path'], '/metrics');
    // $(VAR) in args expands only from the container's own env.
    for (const ref of args.join(' ').matchAll(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g)) {
      assert.ok(env.some((e) => e.name === ref[1]), `args use $(${ref[1]}), which env defines`);
    }
  });

  test('resources and the non-root security context are set', () => {
    assert.ok(container.resources?.requests?.cpu && container.resources.requests.memory && container.resources.limits?.memory);
    assert.equal(podSpec.securityContext?.runAsNonRoot, true);
    assert.equal(container.securityContext?.allowPrivilegeEscalation, false);
    assert.equal(container.securityContext?.readOnlyRootFilesystem, true);
    assert.deepEqual(container.securityContext?.capabilities?.drop, ['ALL']);
  });
});

// ---- the worker image, without Docker: what a reading of the files can establish ----

interface Instruction {
  keyword: string;
  args: string;
}
interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

/** A small Dockerfile reader: comments, line continuations, one instruction per logical line. */
function readDockerfile(text: string): Stage[] {
  const logical: string[] = [];
  let current = '';
  for (const line of text.split('\n')) {
    if (/^\s*#/.test(line) && current === '') continue;
    if (/\\\s*$/.test(line)) {
      current += line.replace(/\\\s*$/, ' ');
      continue;
    }
    current += line;
    if (current.trim()) logical.push(current.trim());
    current = '';
  }
  const stages: Stage[] = [];
  for (const line of logical) {
    const [keyword = '', ...rest] = line.split(/\s+/);
    const args = rest.join(' ');
    if (keyword.toUpperCase() === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?/i.exec(args) ?? assert.fail(`FROM ${args}`);
      stages.push({ from: m[1] as string, ...(m[2] ? { name: m[2] } : {}), instructions: [] });
    } else if (stages.length > 0) {
      (stages.at(-1) as Stage).instructions.push({ keyword: keyword.toUpperCase(), args });
    }
  }
  return stages;
}

describe('deploy/Dockerfile (read, not built: there is no Docker engine here)', () => {
  const stages = readDockerfile(readFileSync(join(deployDir, 'Dockerfile'), 'utf8'));
  const runtime = stages.at(-1) ?? assert.fail('no stage');
  const of = (stage: Stage, keyword: string): Instruction[] => stage.instructions.filter((i) => i.keyword === keyword);
  const packageJson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };

  test('multi-stage, and the final stage runs as a numeric non-root user matching the Deployment', () => {
    assert.ok(stages.length >= 2, 'at least a build stage and a runtime stage');
    const users = of(runtime, 'USER');
    const user = users.at(-1)?.args ?? assert.fail('the runtime stage sets USER');
    const [uid = '', gid] = user.split(':');
    assert.match(uid, /^\d+$/, 'numeric, so the kubelet can check runAsNonRoot');
    assert.notEqual(Number(uid), 0);
    if (gid !== undefined) assert.notEqual(Number(gid), 0);
    const deployment = find<V1Deployment>('Deployment', 'rollout-worker');
    assert.equal(deployment.spec?.template.spec?.securityContext?.runAsUser, Number(uid));
    assert.ok(of(runtime, 'EXPOSE').some((e) => e.args.split(/\s+/).includes('9464')), 'EXPOSE 9464, the metrics port');
    assert.match(of(runtime, 'ENTRYPOINT').at(-1)?.args ?? '', /client\/bin\/rollout\.js/);
  });

  test('only production dependencies reach the runtime stage', () => {
    const runtimeRuns = of(runtime, 'RUN').map((r) => r.args).join('\n');
    assert.doesNotMatch(runtimeRuns, /npm (ci|install|i)\b(?![^\n]*--omit=dev)/, 'no full install in the runtime stage');
    const copies = of(runtime, 'COPY');
    const nodeModules = copies.find((c) => /node_modules/.test(c.args)) ?? assert.fail('node_modules is copied into the runtime stage');
    const fromStage = /--from=(\S+)/.exec(nodeModules.args)?.[1] ?? assert.fail('node_modules comes from a build stage');
    const source = stages.find((s) => s.name === fromStage) ?? assert.fail(`no stage ${fromStage}`);
    // In that stage, the last npm command before the copy left only production dependencies.
    const npmRuns = of(source, 'RUN').filter((r) => /\bnpm (ci|install|i|prune)\b/.test(r.args));
    assert.match(npmRuns.at(-1)?.args ?? '', /--omit=dev/, `stage ${fromStage} ends with a production-only install or prune`);
    // No tests, benches or whole-context copies in the runtime image.
    for (const c of copies) {
      assert.doesNotMatch(c.args, /(^|\s)(\/app\/)?(test|bench|scripts|examples)(\/|\s|$)/, `runtime COPY ${c.args}`);
      assert.doesNotMatch(c.args, /^(--\S+\s+)*\.\s/, `runtime COPY ${c.args} copies the whole context`);
    }
  });

  test('what the runtime imports is in dependencies, and inside the directories the image copies', () => {
    const copied = new Set(
      of(runtime, 'COPY')
        .flatMap((c) => c.args.split(/\s+/).filter((a) => !a.startsWith('--')).slice(0, -1))
        .map((p) => p.replace(/^\/app\//, '').replace(/\/$/, '')),
    );
    for (const dir of RUNTIME_DIRS) assert.ok(copied.has(dir), `the runtime stage copies ${dir}/`);
    assert.ok('tsx' in packageJson.dependencies, 'tsx is a production dependency (client/bin/rollout.js registers it at run time)');
    const problems: string[] = [];
    const walk = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? walk(join(dir, d.name)) : /\.(ts|js)$/.test(d.name) ? [join(dir, d.name)] : []));
    for (const file of RUNTIME_DIRS.flatMap((d) => walk(join(root, d)))) {
      const source = readFileSync(file, 'utf8');
      for (const m of source.matchAll(/^\s*(?:import|export)\s+(type\s+)?[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s+['"]([^'"]+)['"]/gm)) {
        if (m[1]) continue; // type-only: erased
        const spec = (m[2] ?? m[3] ?? m[4]) as string;
        if (spec.startsWith('node:')) continue;
        if (spec.startsWith('.')) {
          const top = relative(root, resolve(dirname(file), spec)).split(sep)[0] ?? '';
          if (!copied.has(top)) problems.push(`${relative(root, file)} imports ${spec} (outside the copied directories)`);
          continue;
        }
        const pkg = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] as string);
        if (!(pkg in packageJson.dependencies)) problems.push(`${relative(root, file)} imports ${pkg}, which is not in dependencies`);
      }
    }
    assert.deepEqual(problems, []);
  });

  test('the build context is an allow-list that holds what the Dockerfile copies', () => {
    const ignore = readFileSync(join(root, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    assert.equal(ignore[0], '*', 'everything is excluded unless listed');
    const allowed = new Set(ignore.filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/$/, '')));
    for (const stage of stages) {
      for (const c of of(stage, 'COPY').filter((x) => !/--from=/.test(x.args))) {
        for (const src of c.args.split(/\s+/).filter((a) => !a.startsWith('--')).slice(0, -1)) {
          assert.ok(allowed.has(src.replace(/\/$/, '')), `COPY ${src} is in the .dockerignore allow-list`);
        }
      }
    }
    for (const secretish of ['.rollout', 'node_modules', '.git', 'test-output']) assert.ok(!allowed.has(secretish), `${secretish} stays out of the context`);
  });
});
