/**
 * The trainer-facing API. `submitBatch` validates the tasks and options, then
 * starts one rolloutGroup workflow per task under a stable id
 * (`rollout/<batch>/<task>`): submitting the same batch again attaches to the
 * groups already started instead of duplicating work. Group results stream
 * back as each group finishes.
 */
import { Connection, WorkflowExecutionAlreadyStartedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { TypedSearchAttributes, WorkflowIdReusePolicy } from '@temporalio/common';
import { loadTask } from '../tasks/loadTask.js';
import { groupWorkflowId } from '../shared/names.js';
import { branchingProblem, harnessProblem, GroupInputSchema, type GroupInput, type GroupResult, type ResolvedGroupInput } from '../shared/pipeline.js';
import { ROLLOUT_BATCH, ROLLOUT_TASK_ID, ROLLOUT_TASK_VERSION } from '../shared/searchAttributes.js';
import { ClassifiedError } from '../shared/failures.js';
import type { rolloutGroup } from '../workflows/rolloutGroup.js';
import { addressOf, serverWait, type ServerWait } from './outage/serverWait.js';
import { ChatTemplateError, loadChatTemplate } from './chatTemplate/loadChatTemplate.js';

export type SubmitBatchOptions = Omit<GroupInput, 'task'> & {
  /** Task directories (Harbor format). */
  tasks: string[];
};

export class BatchInputError extends Error {
  override readonly name = 'BatchInputError';
}

export interface SubmittedGroup {
  taskId: string;
  workflowId: string;
  /** False when this call attached to a group an earlier submission started. */
  started: boolean;
  handle: WorkflowHandle<typeof rolloutGroup>;
}

export interface SubmittedBatch {
  batchId: string;
  groups: SubmittedGroup[];
  /**
   * Group results in the order the groups finish. A group that fails (e.g. cancelled) rejects. A
   * Temporal server that is unreachable or hangs meanwhile is waited out (said once on stderr) and
   * every wait re-attached: no finished group's result is lost.
   */
  results(): AsyncGenerator<GroupResult>;
}

export interface SubmitOptions {
  /** How outages of the Temporal server are waited out and reported (default: on stderr). */
  serverWait?: ServerWait;
}

function policyLabel(input: ResolvedGroupInput): string {
  return input.policy.kind === 'scripted'
    ? `scripted:${input.policy.script}`
    : input.policy.kind === 'harness'
      ? `${input.policy.harness} on ${input.policy.inference.model} @ ${input.policy.inference.baseUrl}`
      : `${input.policy.model} @ ${input.policy.baseUrl}`;
}

function groupSummary(input: ResolvedGroupInput): string {
  const branches = input.branchOf ? ` · branches of ${input.branchOf.rolloutWorkflowId} at turn ${input.branchOf.atTurn}` : '';
  return `group ${input.task.id} × ${input.groupSize} · ${policyLabel(input)}${branches}`;
}

function groupDetails(input: ResolvedGroupInput): string {
  return [
    `**batch** ${input.batchId}`,
    `**task** ${input.task.id} (version ${input.task.version.slice(0, 12)}) at ${input.task.dir}`,
    `**group size** ${input.groupSize}, minValid ${input.minValid}`,
    `**policy** ${policyLabel(input)}`,
    `**limits** maxTurns ${input.limits.maxTurns}, command timeout ${input.limits.commandTimeoutSec} s${input.limits.agentTimeoutSec ? `, agent budget ${input.limits.agentTimeoutSec} s` : ''}`,
    `**network** ${input.network ?? "the task's own (Harbor's rules)"}`,
    `**verify** ${input.verifyMode}; infra retries ${input.failurePolicy.infra.retries} then ${input.failurePolicy.infra.onExhausted}; resume ${input.failurePolicy.resume}`,
    ...(input.branchOf
      ? [
          `**branches of** ${input.branchOf.rolloutWorkflowId} (attempt ${input.branchOf.attempt + 1}): turns 0-${input.branchOf.atTurn - 1} shared, each branch samples from turn ${input.branchOf.atTurn}`,
        ]
      : []),
  ].join('\n');
}

/** A chat template given as a file path is read and checked once, here, and carried as text with its sha256 (a harness's inference server's too). */
function withChatTemplate(policy: SubmitBatchOptions['policy'], where = 'policy'): SubmitBatchOptions['policy'] {
  if (policy.kind === 'harness') {
    const inference = withChatTemplate(policy.inference, 'policy.inference');
    return inference.kind === 'openai' ? { ...policy, inference } : policy;
  }
  const template = policy.kind === 'openai' ? policy.tokens?.chatTemplate : undefined;
  if (policy.kind !== 'openai' || typeof template !== 'string') return policy;
  try {
    return { ...policy, tokens: { ...policy.tokens, chatTemplate: loadChatTemplate(template) } };
  } catch (err) {
    if (err instanceof ChatTemplateError) throw new BatchInputError(`${where}.tokens.chatTemplate: ${err.message}`);
    throw err;
  }
}

/** Validates options for every task and returns the workflow inputs, or throws BatchInputError naming the problem. */
export function resolveBatch(options: SubmitBatchOptions): ResolvedGroupInput[] {
  if (options.tasks.length === 0) throw new BatchInputError('no tasks: pass at least one task directory');
  const { tasks, ...shared } = options;
  const seen = new Set<string>();
  const policy = withChatTemplate(shared.policy);
  return tasks.map((dir) => {
    let task;
    try {
      task = loadTask(dir);
    } catch (err) {
      if (err instanceof ClassifiedError) throw new BatchInputError(err.message);
      throw err;
    }
    if (seen.has(task.id)) throw new BatchInputError(`task id ${task.id} appears twice in the batch (${dir}); task directory names must be unique`);
    seen.add(task.id);
    const parsed = GroupInputSchema.safeParse({ ...shared, policy, task: { id: task.id, dir: task.dir, version: task.version } });
    if (!parsed.success) {
      throw new BatchInputError(parsed.error.issues.map((i) => `${i.path.join('.') || 'batch'}${i.path[0] === 'task' ? ` (${dir})` : ''}: ${i.message}`).join('; '));
    }
    const branching = branchingProblem(parsed.data) ?? harnessProblem(parsed.data);
    if (branching) throw new BatchInputError(branching);
    return parsed.data;
  });
}

export async function submitBatch(client: Client, options: SubmitBatchOptions, submit: SubmitOptions = {}): Promise<SubmittedBatch> {
  return submitResolvedBatch(client, resolveBatch(options), submit);
}

/** Starts (or attaches to) the groups of an already validated batch. */
export async function submitResolvedBatch(client: Client, inputs: ResolvedGroupInput[], submit: SubmitOptions = {}): Promise<SubmittedBatch> {
  const wait = submit.serverWait ?? serverWait(addressOf(client));
  const batchId = inputs[0]?.batchId ?? '';
  const groups: SubmittedGroup[] = [];
  for (const input of inputs) {
    const workflowId = groupWorkflowId(input.batchId, input.task.id);
    let started = true;
    let handle: WorkflowHandle<typeof rolloutGroup>;
    try {
      // A start retried after its answer was lost finds the group started: attached below, not duplicated.
      handle = await wait.retry(`starting the groups of batch ${input.batchId}`, () => client.workflow.start<typeof rolloutGroup>('rolloutGroup', {
        workflowId,
        taskQueue: input.taskQueues.main,
        args: [input],
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        staticSummary: groupSummary(input),
        staticDetails: groupDetails(input),
        typedSearchAttributes: new TypedSearchAttributes([
          { key: ROLLOUT_BATCH, value: input.batchId },
          { key: ROLLOUT_TASK_ID, value: input.task.id },
          { key: ROLLOUT_TASK_VERSION, value: input.task.version },
        ]),
      }));
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      started = false;
      handle = client.workflow.getHandle<typeof rolloutGroup>(workflowId);
    }
    groups.push({ taskId: input.task.id, workflowId, started, handle });
  }
  return {
    batchId,
    groups,
    async *results() {
      const what = `the results of batch ${batchId}`;
      const stopWatch = client.connection instanceof Connection ? wait.watch(what, client.connection) : () => undefined;
      try {
        const pending = new Map(groups.map((g) => [g.workflowId, wait.retry(what, () => g.handle.result()).then((r) => ({ id: g.workflowId, r }))]));
        while (pending.size > 0) {
          const { id, r } = await Promise.race(pending.values());
          pending.delete(id);
          yield r;
        }
      } finally {
        stopWatch();
      }
    },
  };
}
