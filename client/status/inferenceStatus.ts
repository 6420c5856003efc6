/**
 * The inference server a running batch talks to, as `rollout status` reports it: how many of the
 * batch's rollouts are running and the server's own load (policies/admission/), read
 * from the server the batch's first running group names in its input.
 */
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { describeLoad, readInferenceLoad } from '../../policies/admission/inferenceLoad.js';
import { serverKind } from '../../policies/sampling/serverKind.js';
import { serverRoot } from '../../policies/tokens/serverEndpoints.js';
import { GroupRequestSchema } from '../../shared/pipeline.js';

/** One line, or undefined when the batch runs nothing or its policy is scripted. */
export async function inferenceStatus(client: Client, batchId: string, runningGroupId: string): Promise<string | undefined> {
  const { count } = await client.workflow.count(`RolloutBatch="${batchId}" AND WorkflowType="rollout" AND ExecutionStatus="Running"`);
  const history = await client.workflow.getHandle(runningGroupId).fetchHistory();
  const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  if (!payload) return undefined;
  const parsed = GroupRequestSchema.safeParse(defaultPayloadConverter.fromPayload<unknown>(payload));
  if (!parsed.success || parsed.data.policy.kind !== 'openai') return `${count} rollout${count === 1 ? '' : 's'} running`;
  const policy = parsed.data.policy;
  const root = serverRoot(policy.baseUrl, policy.tokens.serverUrl);
  const kind = await serverKind(policy.server, root, 5_000).catch(() => undefined);
  const load = kind ? await readInferenceLoad(root, kind) : null;
  return `${count} rollout${count === 1 ? '' : 's'} running · inference server ${kind ?? 'unreachable'} ${root}: ${describeLoad(load)} · admission ${policy.admission.mode}`;
}
