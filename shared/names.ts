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

export function groupWorkflowId(batchId: string, taskId: string): string {
  return `rollout/${batchId}/${taskId}`;
}

export function rolloutWorkflowId(batchId: string, taskId: string, index: number): string {
  return `rollout/${batchId}/${taskId}/${index}`;
}
