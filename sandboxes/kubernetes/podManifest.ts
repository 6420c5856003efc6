/**
 * The Pod a sandbox is: its labels and annotations (what the reaper selects
 * and decides on), the task's limits as requests = limits, every capability
 * dropped, no service account token, and a keeper process that waits for
 * execs and exits on SIGTERM.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { ClassifiedError } from '../../shared/failures.js';
import type { SandboxSpecSchema } from '../../shared/sandbox.js';

type ResolvedSandboxSpec = ReturnType<typeof SandboxSpecSchema.parse>;

/** Where the provider's options place a sandbox pod. */
export interface PodPlacement {
  namespace: string;
  defaultImage?: string;
  runtimeClassName?: string;
  nodeSelector?: Record<string, string>;
  nodeName?: string;
}

export const LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  sandbox: 'rollout-pipeline/sandbox',
  egress: 'rollout-pipeline/egress',
} as const;
export const ANNOTATIONS = {
  workflowId: 'rollout-pipeline/workflow-id',
  runId: 'rollout-pipeline/run-id',
  attempt: 'rollout-pipeline/attempt',
  leaseExpiresAt: 'rollout-pipeline/lease-expires-at',
  labels: 'rollout-pipeline/labels',
} as const;
export const CONTAINER = 'sandbox';

/** Label values: 63 chars of [A-Za-z0-9._-], alphanumeric at both ends. */
export function labelValue(value: string): string {
  const cleaned = value.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 63);
  return cleaned.replace(/^[^A-Za-z0-9]+/, '').replace(/[^A-Za-z0-9]+$/, '');
}

export function sandboxPod(id: string, spec: ResolvedSandboxSpec, options: PodPlacement): V1Pod {
  const image = spec.image ?? options.defaultImage;
  if (!image)
    throw new ClassifiedError(
      'task',
      'invalid_spec',
      'the Kubernetes sandbox provider needs a container image: set [environment].docker_image in task.toml (or a default image for the provider)',
    );
  const limits: Record<string, string> = {};
  if (spec.limits.memoryMb !== undefined) limits.memory = `${spec.limits.memoryMb}Mi`;
  if (spec.limits.cpus !== undefined) limits.cpu = `${Math.round(spec.limits.cpus * 1000)}m`;
  if (spec.limits.diskMb !== undefined) limits['ephemeral-storage'] = `${spec.limits.diskMb}Mi`;
  const leaseExpiresAt = new Date(Date.now() + spec.leaseMs).toISOString();
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: id,
      namespace: options.namespace,
      labels: {
        [LABELS.managedBy]: 'rollout-pipeline',
        [LABELS.sandbox]: 'true',
        [LABELS.egress]: spec.network === 'none' ? 'deny' : 'allow',
        ...Object.fromEntries(Object.entries(spec.labels).map(([k, v]) => [`rollout-pipeline/${labelValue(k)}`, labelValue(v)])),
      },
      annotations: {
        [ANNOTATIONS.workflowId]: spec.owner.workflowId,
        [ANNOTATIONS.runId]: spec.owner.runId,
        [ANNOTATIONS.attempt]: String(spec.owner.attempt),
        [ANNOTATIONS.leaseExpiresAt]: leaseExpiresAt,
        [ANNOTATIONS.labels]: JSON.stringify(spec.labels),
      },
    },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 0,
      ...(options.runtimeClassName ? { runtimeClassName: options.runtimeClassName } : {}),
      ...(options.nodeSelector ? { nodeSelector: options.nodeSelector } : {}),
      ...(options.nodeName ? { nodeName: options.nodeName } : {}),
      securityContext: { seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: CONTAINER,
          image,
          command: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 3600 & wait $!; done'],
          workingDir: spec.workdir,
          resources: { limits, requests: limits },
          securityContext: { allowPrivilegeEscalation: false, privileged: false, capabilities: { drop: ['ALL'] } },
        },
      ],
    },
  };
}
