/**
 * Task queue names and workflow ids, declared once. No dependencies: workflow
 * code, workers, the client and tests all import this module.
 */

export const TASK_QUEUES = {
  /** Workflows and sandbox provisioning. */
  main: 'rollout-pipeline',
  /** Policy (LLM) calls, rate limited so an inference server is never flooded. */
  policy: 'rollout-pipeline-policy',
} as const;

/** The worker-specific queue of the host that holds a local sandbox: tool calls, verify, teardown go there. */
export function hostTaskQueue(host: string): string {
  return `rollout-pipeline-host-${host}`;
}

/**
 * The queue beside a host's own where the rollouts whose attempts run on that host (group.attemptOn
 * 'host') keep their watchHost activity: served by the same worker process, so it dies with the
 * host's worker, but with slots of its own, so watches never wait behind tool calls.
 */
export function hostWatchQueue(hostQueue: string): string {
  return `${hostQueue}-watch`;
}

export function groupWorkflowId(batchId: string, taskId: string): string {
  return `rollout/${batchId}/${taskId}`;
}

export function rolloutWorkflowId(batchId: string, taskId: string, index: number): string {
  return `rollout/${batchId}/${taskId}/${index}`;
}

/** Where a rollout's trajectory lives in the store: `<batch>/<task>/<index>`. */
export function trajectoryRefOf(batchId: string, taskId: string, index: number): string {
  return `${batchId}/${taskId}/${index}`;
}

/** The rollout index at the end of a trajectory ref; undefined when the ref is not one. */
export function rolloutIndexOfRef(trajectoryRef: string): number | undefined {
  const last = trajectoryRef.slice(trajectoryRef.lastIndexOf('/') + 1);
  return /^\d+$/.test(last) ? Number(last) : undefined;
}
