/**
 * Rerun: starts a new rollout with the same experiment record as a finished
 * one (pinned task version, policy with its sampling seed, limits, verify
 * mode, rollout index, which the per-turn seed derives from) under a new
 * batch id, waits for it, and compares the two records and outcomes.
 */
import { WorkflowIdReusePolicy, type Client } from '@temporalio/client';
import { defaultPayloadConverter, TypedSearchAttributes } from '@temporalio/common';
import { rolloutWorkflowId } from '../shared/names.js';
import type { ExperimentRecord, RolloutInput, RolloutResult } from '../shared/pipeline.js';
import { ROLLOUT_BATCH, ROLLOUT_TASK_ID, ROLLOUT_TASK_VERSION } from '../shared/searchAttributes.js';

export class RerunError extends Error {
  override readonly name = 'RerunError';
}

/** Fields of the experiment record that must match for the rerun to be the same experiment. */
export const PINNED_FIELDS = ['taskId', 'taskVersion', 'environmentIdentity', 'toolInterfaceHash', 'resetRules', 'verifierHash', 'verifyMode', 'limits', 'policy', 'network'] as const;
/** Fields that describe where it ran, expected to differ when the code or worker changed. */
export const PROVENANCE_FIELDS = ['pipelineVersion', 'workerIdentity', 'sandboxProvider'] as const;

export interface FieldComparison {
  field: string;
  original: string;
  rerun: string;
  same: boolean;
  pinned: boolean;
}

export interface RolloutRerun {
  originalWorkflowId: string;
  rerunWorkflowId: string;
  original: RolloutResult;
  rerun: RolloutResult;
  fields: FieldComparison[];
  /** Every pinned field of the experiment record is identical. */
  sameExperiment: boolean;
}

/** The input the rollout workflow was started with, read from its history. */
export async function rolloutInputOf(client: Client, workflowId: string): Promise<RolloutInput> {
  let history;
  try {
    history = await client.workflow.getHandle(workflowId).fetchHistory();
  } catch (err) {
    throw new RerunError(
      `cannot read the history of ${workflowId}: ${err instanceof Error ? err.message : String(err)}. Fix: name a rollout workflow id (rollout/<batch>/<task>/<index>) of this namespace`,
    );
  }
  const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
  if (started?.workflowType?.name !== 'rollout')
    throw new RerunError(
      `${workflowId} is a ${started?.workflowType?.name ?? 'unknown'} workflow, not a rollout; name one rollout (rollout/<batch>/<task>/<index>)`,
    );
  const payload = started.input?.payloads?.[0];
  if (!payload) throw new RerunError(`${workflowId}: its start event has no input`);
  return defaultPayloadConverter.fromPayload<RolloutInput>(payload);
}

function show(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** A field's value as compared: the network by its mode (the rerun pins it, so its source says the batch's). */
function compared(record: ExperimentRecord | null, field: (typeof PINNED_FIELDS)[number] | (typeof PROVENANCE_FIELDS)[number]): string {
  if (field === 'network') return record?.network ? record.network.mode : 'not recorded';
  return show(record?.[field] ?? null);
}

export function compareRecords(a: ExperimentRecord | null, b: ExperimentRecord | null): FieldComparison[] {
  const fields: FieldComparison[] = [];
  for (const [names, pinned] of [[PINNED_FIELDS, true], [PROVENANCE_FIELDS, false]] as const) {
    for (const field of names) {
      const original = compared(a, field);
      const rerun = compared(b, field);
      fields.push({ field, original, rerun, same: original === rerun, pinned });
    }
  }
  return fields;
}

export async function rerunRollout(options: { client: Client; workflowId: string; batchId?: string }): Promise<RolloutRerun> {
  const { client, workflowId } = options;
  const input = await rolloutInputOf(client, workflowId);
  const originalHandle = client.workflow.getHandle(workflowId);
  const { status } = await originalHandle.describe();
  if (status.name === 'RUNNING') throw new RerunError(`${workflowId} is still running; wait for it (or cancel it with rollout cancel) before rerunning`);
  let original: RolloutResult;
  try {
    original = (await originalHandle.result()) as RolloutResult;
  } catch (err) {
    throw new RerunError(`${workflowId} did not complete (${status.name}): ${err instanceof Error ? err.message : String(err)}; there is no experiment record to compare with`);
  }
  const batchId = options.batchId ?? `${input.group.batchId}-rerun-${new Date().toISOString().replace(/[-:T.Z]/g, '').slice(0, 14)}`;
  // The network the original ran with, whatever the task's default is now (a record from before networks were recorded has none).
  const network = original.experiment?.network?.mode;
  const group = { ...input.group, batchId, ...(network ? { network } : {}) };
  const rerunWorkflowId = rolloutWorkflowId(batchId, group.task.id, input.index);
  const handle = await client.workflow.start('rollout', {
    workflowId: rerunWorkflowId,
    taskQueue: group.taskQueues.main,
    args: [{ group, index: input.index } satisfies RolloutInput],
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    staticSummary: `rerun of ${workflowId}`,
    staticDetails: `**rerun** of ${workflowId} with the same experiment record · **task** ${group.task.id} (version ${group.task.version.slice(0, 12)}) · **rollout** ${input.index}`,
    typedSearchAttributes: new TypedSearchAttributes([
      { key: ROLLOUT_BATCH, value: batchId },
      { key: ROLLOUT_TASK_ID, value: group.task.id },
      { key: ROLLOUT_TASK_VERSION, value: group.task.version },
    ]),
  });
  const rerun = (await handle.result()) as RolloutResult;
  const fields = compareRecords(original.experiment, rerun.experiment);
  return { originalWorkflowId: workflowId, rerunWorkflowId, original, rerun, fields, sameExperiment: fields.every((f) => !f.pinned || f.same) };
}
