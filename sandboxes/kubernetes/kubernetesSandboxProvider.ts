/**
 * Sandboxes as Kubernetes Pods, one per attempt, through the API server:
 * created (paced, retried on 409/429/5xx), waited on until Running, exec'd
 * into through the pods/exec endpoint, deleted with grace 1 (the node confirms
 * it stopped every process before the pod leaves the API). Pods carry the
 * labels and annotations the reaper selects on (owner workflow, run, attempt,
 * lease). Files move through exec (base64 in argv: some runtimes never pass
 * stdin EOF on), and command timeouts run inside the pod (`timeout`), since a
 * dropped exec connection does not stop the command.
 *
 * Isolation is the cluster's: the pod's security context drops every
 * capability, no service account token is mounted, egress is denied by the
 * deploy/ NetworkPolicy for pods labelled `rollout-pipeline/egress: deny`, and
 * a runtimeClassName (gVisor, Kata) can be required.
 */
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { ApiException, CoreV1Api, Exec, PatchStrategy, setHeaderOptions, type KubeConfig, type V1Pod, type V1Status } from '@kubernetes/client-node';
import { ClassifiedError } from '../../shared/failures.js';
import {
  KubernetesSandboxHandleSchema,
  SandboxSpecSchema,
  type EnforcedLimits,
  type ExecOptions,
  type ExecResult,
  type KubernetesSandboxHandle,
  type ProvisionResult,
  type ReadFileOptions,
  type SandboxHandle,
  type SandboxProvider,
  type SandboxRecord,
  type SandboxSpec,
  type TeardownReport,
} from '../../shared/sandbox.js';
import { BoundedOutput } from '../boundedOutput.js';
import { infra, quotaExceeded, statusCode } from './apiErrors.js';
import { CreationPacer } from './creationPacer.js';
import { exitCodeOf, shellQuote } from './execStatus.js';
import { ANNOTATIONS, CONTAINER, LABELS, labelValue, sandboxPod } from './podManifest.js';


export interface KubernetesSandboxProviderOptions {
  kubeConfig: KubeConfig;
  /** Namespace the sandbox pods live in (deploy/ creates `rollout-sandboxes`). */
  namespace: string;
  /** Image for tasks that name none ([environment].docker_image). */
  defaultImage?: string;
  /** gVisor, Kata, ...: sandboxes only run where that runtime is. */
  runtimeClassName?: string;
  nodeSelector?: Record<string, string>;
  /** Pins every sandbox to one node (a one-node cluster, tests); normally the scheduler places pods. */
  nodeName?: string;
  /** Pod creations per second from this worker (protects the API server). */
  createsPerSecond?: number;
  /** How long a pod may take to be Running before the attempt ends as infra/provision_timeout. */
  readyTimeoutMs?: number;
  defaultExecTimeoutMs?: number;
  defaultMaxOutputBytes?: number;
}

export class KubernetesSandboxProvider implements SandboxProvider {
  readonly name = 'kubernetes';
  private readonly core: CoreV1Api;
  private readonly execApi: Exec;
  private readonly pacer: CreationPacer;

  constructor(private readonly options: KubernetesSandboxProviderOptions) {
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.execApi = new Exec(options.kubeConfig);
    this.pacer = new CreationPacer(options.createsPerSecond ?? 10);
  }

  async provision(input: SandboxSpec): Promise<ProvisionResult> {
    const spec = SandboxSpecSchema.parse(input);
    sandboxPod('rollout-sbx-check', spec, this.options); // a task error (no image) before anything is created
    let created: V1Pod | undefined;
    for (let tries = 0; !created; tries++) {
      const id = `rollout-sbx-${randomBytes(6).toString('hex')}`;
      const body = sandboxPod(id, spec, this.options);
      await this.pacer.wait();
      try {
        created = await this.core.createNamespacedPod({ namespace: this.options.namespace, body });
      } catch (err) {
        const code = statusCode(err);
        const retryable = code === 409 || code === 429 || (code !== undefined && code >= 500);
        if (!retryable || tries >= 5) {
          // A namespace ResourceQuota that is used up answers 403 too, but it is capacity, not a missing
          // permission: the attempt fails retryable and the rollout waits for pods to finish.
          const quota = code === 403 ? quotaExceeded(err) : undefined;
          if (quota !== undefined)
            throw infra(
              'provision_failed',
              `the namespace ${this.options.namespace} is at its ResourceQuota (${quota}); the attempt is retried when pods finish: raise the quota or lower the batch's concurrency`,
              err,
            );
          if (code === 403)
            throw infra(
              'capability_missing',
              `the API server refused to create pods in ${this.options.namespace} (403): grant the worker's ServiceAccount the Role in deploy/kubernetes`,
              err,
            );
          throw infra('provision_failed', `cannot create a sandbox pod in ${this.options.namespace}: ${err instanceof Error ? err.message : String(err)}`, err);
        }
        const retryAfter = err instanceof ApiException ? Number((err.headers as Record<string, string> | undefined)?.['retry-after']) : NaN;
        await new Promise((r) => setTimeout(r, Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : 200 * 2 ** tries));
      }
    }
    const name = created.metadata?.name ?? '';
    const uid = created.metadata?.uid ?? '';
    const deadline = Date.now() + (this.options.readyTimeoutMs ?? 120_000);
    let running: V1Pod | undefined;
    while (!running) {
      let pod: V1Pod;
      try {
        pod = await this.core.readNamespacedPod({ namespace: this.options.namespace, name });
      } catch (err) {
        if (statusCode(err) === 404) throw infra('provision_failed', `sandbox pod ${name} disappeared while starting`, err);
        throw infra('provision_failed', `cannot read sandbox pod ${name}: ${err instanceof Error ? err.message : String(err)}`, err);
      }
      const phase = pod.status?.phase;
      if (phase === 'Running' && pod.status?.containerStatuses?.every((c) => c.ready)) {
        running = pod;
        break;
      }
      if (phase === 'Failed' || phase === 'Succeeded') {
        await this.deletePod(name, 0).catch(() => false);
        throw infra('provision_failed', `sandbox pod ${name} ended (${phase}) before it ran: ${pod.status?.message ?? pod.status?.reason ?? ''}`);
      }
      if (Date.now() > deadline) {
        await this.deletePod(name, 0).catch(() => false); // never Running: out of the API at once (its node, if any, stops what it started)
        const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting;
        throw infra(
          'provision_timeout',
          `sandbox pod ${name} not Running after ${(this.options.readyTimeoutMs ?? 120_000) / 1000} s (phase ${phase ?? 'unknown'}${waiting ? `, ${waiting.reason}: ${waiting.message ?? ''}` : ''}); deleted`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    const handle: KubernetesSandboxHandle = { provider: 'kubernetes', id: name, namespace: this.options.namespace, container: CONTAINER, uid, workdir: spec.workdir };
    const byPod = (requested: unknown): EnforcedLimits[keyof EnforcedLimits] => (requested === undefined ? 'not-requested' : 'pod-limits');
    const enforcedLimits: EnforcedLimits = {
      memory: byPod(spec.limits.memoryMb),
      cpu: byPod(spec.limits.cpus),
      disk: byPod(spec.limits.diskMb),
      pids: spec.limits.pids === undefined ? 'not-requested' : 'not-enforced',
    };
    // The kubelet reports the image it runs as repo@sha256:... (the manifest pulled); a fake node may report none.
    const status = running.status?.containerStatuses?.find((c) => c.name === CONTAINER);
    const digest = /(sha256:[0-9a-f]{64})$/.exec(status?.imageID ?? '')?.[1];
    return { handle, enforcedLimits, ...(digest ? { image: { reference: status?.image ?? spec.image ?? '', digest } } : {}) };
  }

  private parseHandle(handle: SandboxHandle): KubernetesSandboxHandle {
    const parsed = KubernetesSandboxHandleSchema.safeParse(handle);
    if (!parsed.success) throw infra('exec_transport', `not a Kubernetes sandbox handle: ${parsed.error.message}`);
    return parsed.data;
  }

  /** Runs argv in the pod; resolves with the exit code and bounded output. */
  private async run(
    h: KubernetesSandboxHandle,
    argv: string[],
    maxOutputBytes: number,
    hardTimeoutMs: number,
    signal?: AbortSignal,
  ): Promise<{ exitCode: number; stdout: BoundedOutput; stderr: BoundedOutput }> {
    const stdout = new BoundedOutput(maxOutputBytes);
    const stderr = new BoundedOutput(maxOutputBytes);
    const out = new PassThrough();
    const err = new PassThrough();
    stdout.attach(out);
    stderr.attach(err);
    let socket: { close(): void } | undefined;
    const status = await new Promise<V1Status>((resolve, reject) => {
      const timer = setTimeout(() => {
        socket?.close();
        reject(infra('exec_transport', `exec in sandbox pod ${h.id} got no status within ${Math.round(hardTimeoutMs / 1000)} s`));
      }, hardTimeoutMs);
      const onAbort = (): void => {
        socket?.close();
        reject(signal?.reason instanceof Error ? signal.reason : new Error('exec aborted'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.execApi
        .exec(h.namespace, h.id, h.container, argv, out, err, null, false, (s) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(s);
        })
        .then(
          (ws: unknown) => {
            // isomorphic-ws ships no types; the socket is a `ws` WebSocket
            const connection = ws as { on(event: 'close', listener: () => void): void; close(): void };
            socket = connection;
            connection.on('close', () => setTimeout(() => reject(infra('exec_transport', `exec connection to sandbox pod ${h.id} closed without a status`)), 500));
          },
          (e: unknown) => {
            clearTimeout(timer);
            reject(e instanceof Error ? e : new Error(String(e)));
          },
        );
    }).catch(async (e: unknown) => {
      if (e instanceof ClassifiedError || signal?.aborted) throw e;
      throw await this.lostOr(h, e);
    });
    const exitCode = exitCodeOf(status);
    if (exitCode === undefined) throw await this.lostOr(h, new Error(`${status.reason ?? 'unknown'}: ${status.message ?? JSON.stringify(status)}`));
    return { exitCode, stdout, stderr };
  }

  /** sandbox_lost when the pod is gone or is another pod now; else exec_transport. */
  private async lostOr(h: KubernetesSandboxHandle, cause: unknown): Promise<ClassifiedError<'infra'>> {
    const message = cause instanceof Error ? cause.message : String(cause);
    try {
      const pod = await this.core.readNamespacedPod({ namespace: h.namespace, name: h.id });
      if (pod.metadata?.uid !== h.uid || pod.metadata.deletionTimestamp || pod.status?.phase !== 'Running') {
        return infra('sandbox_lost', `sandbox pod ${h.id} is gone (${pod.metadata?.deletionTimestamp ? 'being deleted' : pod.status?.phase}): ${message}`, cause);
      }
    } catch (err) {
      if (statusCode(err) === 404) return infra('sandbox_lost', `sandbox pod ${h.id} no longer exists: ${message}`, cause);
    }
    return infra('exec_transport', `exec in sandbox pod ${h.id} failed: ${message}`, cause);
  }

  async exec(handle: SandboxHandle, command: string, options: ExecOptions = {}): Promise<ExecResult> {
    const h = this.parseHandle(handle);
    const timeoutMs = options.timeoutMs ?? this.options.defaultExecTimeoutMs ?? 120_000;
    const cwd = options.cwd ?? h.workdir;
    const env = Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`);
    let script = 'cd -- "$1" || exit 125; eval "$2"';
    if (options.stdin !== undefined) {
      // stdin through argv: exec'd stdin may never see EOF on some runtimes
      script = `cd -- "$1" || exit 125; printf %s "$3" | base64 -d | { eval "$2"; }`;
    }
    const stdinB64 = options.stdin === undefined ? [] : [Buffer.from(options.stdin).toString('base64')];
    // The timeout runs in the pod: closing the exec connection would not stop the command.
    const argv = ['env', ...env, 'timeout', '-s', 'TERM', '-k', '2', String(Math.max(1, Math.ceil(timeoutMs / 1000))), 'sh', '-c', script, 'sh', cwd, command, ...stdinB64];
    const started = performance.now();
    const r = await this.run(h, argv, options.maxOutputBytes ?? this.options.defaultMaxOutputBytes ?? 1024 * 1024, timeoutMs + 30_000, options.signal);
    const durationMs = performance.now() - started;
    const timedOut = (r.exitCode === 124 || r.exitCode === 137) && durationMs >= timeoutMs * 0.9;
    return { exitCode: r.exitCode, stdout: r.stdout.text(), stderr: r.stderr.text(), timedOut, durationMs, stdoutTruncated: r.stdout.truncated, stderrTruncated: r.stderr.truncated };
  }

  async writeFile(handle: SandboxHandle, path: string, content: string | Uint8Array): Promise<void> {
    const h = this.parseHandle(handle);
    const b64 = Buffer.from(content).toString('base64');
    const tmp = `${path}.rollout-upload-${randomBytes(4).toString('hex')}`;
    const CHUNK = 96 * 1024; // well under the kernel's 128 KiB limit for one argument
    const step = async (script: string, arg = ''): Promise<void> => {
      const r = await this.run(h, ['sh', '-c', script, 'sh', arg], 64 * 1024, 120_000);
      if (r.exitCode !== 0) throw new Error(`cannot write ${path} in sandbox pod ${h.id}: ${r.stderr.text().trim() || `exit ${r.exitCode}`}`);
    };
    await step(`mkdir -p -- "$(dirname -- ${shellQuote(tmp)})" && : > ${shellQuote(tmp)}`);
    for (let i = 0; i < b64.length; i += CHUNK) await step(`printf %s "$1" | base64 -d >> ${shellQuote(tmp)}`, b64.slice(i, i + CHUNK));
    await step(`mv -f -- ${shellQuote(tmp)} ${shellQuote(path)}`);
  }

  async readFile(handle: SandboxHandle, path: string, options: ReadFileOptions = {}): Promise<Uint8Array> {
    const h = this.parseHandle(handle);
    const maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    const r = await this.run(
      h,
      [
        'sh',
        '-c',
        'f="$1"; [ -f "$f" ] || { echo "$f: No such file or directory" >&2; exit 2; }; n=$(wc -c < "$f"); [ "$n" -le "$2" ] || { echo "too large: $n bytes" >&2; exit 3; }; base64 < "$f"',
        'sh',
        path,
        String(maxBytes),
      ],
      Math.ceil((maxBytes * 4) / 3) + 1024 * 1024,
      300_000,
    );
    if (r.exitCode === 3) throw new RangeError(`readFile ${path}: the file has more than ${maxBytes} bytes (maxBytes; ${r.stderr.text().trim()}); read it in parts with exec (head -c / tail -c)`);
    if (r.exitCode !== 0) throw new Error(`cannot read ${path} in sandbox pod ${h.id}: ${r.stderr.text().trim() || `exit ${r.exitCode}`}`);
    return new Uint8Array(Buffer.from(r.stdout.text().replace(/\s+/g, ''), 'base64'));
  }

  async teardown(handleOrId: SandboxHandle | string): Promise<TeardownReport> {
    const name = typeof handleOrId === 'string' ? handleOrId : this.parseHandle(handleOrId).id;
    // Grace 1, not 0: grace 0 removes the pod from the API at once and its kubelet stops the containers
    // some time later; with grace 1 the pod stays (terminating) until its node has stopped them (the
    // sandbox's PID 1 exits on TERM, which kills every process of the pod's PID namespace).
    if (!(await this.deletePod(name, 1))) return { sandboxId: name, existed: false, processesKilled: 0, directoriesRemoved: [], mountsRemoved: [], cgroupsRemoved: [] };
    if (!(await this.goneWithin(name, 15_000))) {
      // Its node does not confirm (gone or unresponsive): remove it from the API; that kubelet stops it when it is back.
      await this.deletePod(name, 0);
      await this.goneWithin(name, 5_000);
    }
    return { sandboxId: name, existed: true, processesKilled: 0, directoriesRemoved: [], mountsRemoved: [], cgroupsRemoved: [] };
  }

  /** false when the pod did not exist. */
  private async deletePod(name: string, gracePeriodSeconds: number): Promise<boolean> {
    try {
      await this.core.deleteNamespacedPod({ namespace: this.options.namespace, name, gracePeriodSeconds });
      return true;
    } catch (err) {
      if (statusCode(err) === 404) return false;
      throw infra('exec_transport', `cannot delete sandbox pod ${name}: ${err instanceof Error ? err.message : String(err)}`, err);
    }
  }

  private async goneWithin(name: string, ms: number): Promise<boolean> {
    for (const deadline = Date.now() + ms; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
      try {
        await this.core.readNamespacedPod({ namespace: this.options.namespace, name });
      } catch (err) {
        if (statusCode(err) === 404) return true;
      }
    }
    return false;
  }

  async list(labels: Record<string, string> = {}): Promise<SandboxRecord[]> {
    const selector = [`${LABELS.sandbox}=true`, ...Object.entries(labels).map(([k, v]) => `rollout-pipeline/${labelValue(k)}=${labelValue(v)}`)].join(',');
    const pods = await this.core.listNamespacedPod({ namespace: this.options.namespace, labelSelector: selector });
    return pods.items.map((pod): SandboxRecord => {
      const a = pod.metadata?.annotations ?? {};
      const name = pod.metadata?.name ?? '';
      let recordLabels: Record<string, string> = {};
      try {
        recordLabels = JSON.parse(a[ANNOTATIONS.labels] ?? '{}') as Record<string, string>;
      } catch {
        // a pod someone else labelled as ours: no labels
      }
      const running = pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp;
      return {
        id: name,
        provider: 'kubernetes',
        owner: { workflowId: a[ANNOTATIONS.workflowId] ?? '', runId: a[ANNOTATIONS.runId] ?? '', attempt: Number(a[ANNOTATIONS.attempt] ?? 0) },
        labels: recordLabels,
        createdAt: pod.metadata?.creationTimestamp ? new Date(pod.metadata.creationTimestamp).toISOString() : '',
        leaseExpiresAt: a[ANNOTATIONS.leaseExpiresAt] ?? '',
        handle: { provider: 'kubernetes', id: name, namespace: this.options.namespace, container: CONTAINER, uid: pod.metadata?.uid ?? '', workdir: pod.spec?.containers[0]?.workingDir ?? '/' },
        alive: running,
      };
    });
  }

  async renewLease(handle: SandboxHandle, leaseMs: number): Promise<void> {
    const h = this.parseHandle(handle);
    await this.core.patchNamespacedPod(
      { namespace: h.namespace, name: h.id, body: { metadata: { annotations: { [ANNOTATIONS.leaseExpiresAt]: new Date(Date.now() + leaseMs).toISOString() } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}
