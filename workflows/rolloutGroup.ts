/**
 * One GRPO group: one task × groupSize rollouts, each a child workflow
 * (cancelled with its parent). Returns every rollout's reward and outcome and
 * the advantages over the valid ones; a group with fewer valid rollouts than
 * minValid is reported insufficient rather than silently averaged.
 */
import { ApplicationFailure, executeChild, getExternalWorkflowHandle, isCancellation, log, metricMeter, ParentClosePolicy, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { PipelineActivities } from '../activities/createActivities.js';
import { failureName } from '../shared/failures.js';
import { describeMasked, maskedSummary } from '../shared/masking.js';
import { METRIC } from '../shared/metricNames.js';
import { rolloutWorkflowId } from '../shared/names.js';
import type { GroupRequest, GroupResult, GroupStatus, ResolvedGroupInput, RolloutResult } from '../shared/pipeline.js';
import { ROLLOUT_BATCH, ROLLOUT_TASK_ID, ROLLOUT_TASK_VERSION } from '../shared/searchAttributes.js';
import { computeAdvantages, siblingAdvantages } from './advantages.js';
import { brokenRollout } from './brokenRollout.js';
import { classifyFailure } from './classifyFailure.js';
import { advancePolicyVersionUpdate, groupProgressQuery, policyVersionProblem, policyVersionSignal, type GroupProgress } from './definitions.js';
import { applyStaleness } from './staleness.js';
import { rollout } from './rollout.js';

/** Applies defaults, rejects bad input naming the field, and pins the task's id and version. */
async function resolveInput(request: GroupRequest): Promise<ResolvedGroupInput | { invalidTask: string }> {
  // Imported here, not at the top: every workflow of the bundle (each rollout too) evaluates the modules
  // this file imports, and building shared/pipeline.ts's zod schemas cost ~25 ms of the workflow thread's
  // CPU per workflow started. Bundled in (webpackMode eager); only a group's first task evaluates it.
  const { GroupRequestSchema, branchingProblem, harnessProblem } = await import(/* webpackMode: "eager" */ '../shared/pipeline.js');
  const parsed = GroupRequestSchema.safeParse(request);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ');
    throw ApplicationFailure.create({ type: 'BadGroupInput', message: `rolloutGroup input: ${problems}`, nonRetryable: true });
  }
  const { task, ...rest } = parsed.data;
  const branching = branchingProblem(rest) ?? harnessProblem(rest);
  if (branching) throw ApplicationFailure.create({ type: 'BadGroupInput', message: `rolloutGroup input: ${branching}`, nonRetryable: true });
  if (task.id !== undefined && task.version !== undefined) return { ...rest, task: { id: task.id, dir: task.dir, version: task.version } };
  const { resolveTask } = proxyActivities<PipelineActivities>({
    taskQueue: rest.taskQueues.main,
    startToCloseTimeout: '1 minute',
    retry: { maximumAttempts: 3, nonRetryableErrorTypes: [failureName({ failureClass: 'task', type: 'invalid_spec' })] },
  });
  try {
    return { ...rest, task: await resolveTask(task) };
  } catch (err) {
    const c = classifyFailure(err);
    if (c.failureClass !== 'task') throw err;
    return { invalidTask: c.message };
  }
}

export async function rolloutGroup(request: GroupRequest): Promise<GroupResult> {
  const resolved = await resolveInput(request);
  if ('invalidTask' in resolved) {
    const dir = typeof request.task === 'object' && request.task ? request.task.dir : '';
    return {
      batchId: request.batchId,
      taskId: dir.slice(dir.lastIndexOf('/') + 1),
      taskVersion: '',
      workflowId: workflowInfo().workflowId,
      status: 'task_invalid',
      statusReason: resolved.invalidTask,
      groupSize: request.groupSize,
      validCount: 0,
      meanReward: null,
      stdReward: null,
      masked: maskedSummary([]),
      rollouts: [],
    };
  }
  const input = resolved;
  const progress: GroupProgress = { total: input.groupSize, finished: 0, rewards: Array.from({ length: input.groupSize }, () => undefined) };
  setHandler(groupProgressQuery, () => progress);

  // Async RL: the trainer advances the served policy version while the group runs; running rollouts are told.
  let policyVersion = input.policyVersion ?? 0;
  const running = new Set<number>(Array.from({ length: input.groupSize }, (_, i) => i));
  setHandler(
    advancePolicyVersionUpdate,
    async ({ version }) => {
      const previous = policyVersion;
      policyVersion = version;
      const targets = version > previous ? [...running] : [];
      await Promise.all(
        targets.map((i) =>
          getExternalWorkflowHandle(rolloutWorkflowId(input.batchId, input.task.id, i))
            .signal(policyVersionSignal, version)
            .catch((err: unknown) => log.info('rollout finished before it heard of the new policy version', { rollout: i, error: String(err) })),
        ),
      );
      return { previous, current: version, notified: targets.length };
    },
    {
      validator: (request: unknown) => {
        const problem = policyVersionProblem(request, policyVersion);
        if (problem) throw new Error(problem);
      },
    },
  );

  const roots = await Promise.all(
    Array.from({ length: input.groupSize }, async (_, index) => {
      let result: RolloutResult;
      try {
        result = await executeChild(rollout, {
          workflowId: rolloutWorkflowId(input.batchId, input.task.id, index),
          taskQueue: input.taskQueues.main,
          args: [{ group: input, index, policyVersion }],
          parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
          staticSummary: `rollout ${index + 1} of ${input.groupSize} · ${input.task.id}`,
          staticDetails: `**batch** ${input.batchId} · **task** ${input.task.id} (version ${input.task.version.slice(0, 12)}) · **rollout** ${index}`,
          typedSearchAttributes: [
            { key: ROLLOUT_BATCH, value: input.batchId },
            { key: ROLLOUT_TASK_ID, value: input.task.id },
            { key: ROLLOUT_TASK_VERSION, value: input.task.version },
          ],
        });
      } catch (err) {
        if (isCancellation(err)) throw err;
        result = brokenRollout({ batchId: input.batchId, taskId: input.task.id, index, workflowId: rolloutWorkflowId(input.batchId, input.task.id, index) }, err);
      }
      running.delete(index);
      progress.finished++;
      progress.rewards[index] = result.reward;
      return result;
    }),
  );

  // group.branching: each root hands up the branches of its tree; the group's rollouts are all of them.
  const rollouts = roots.flatMap(({ branches, ...root }) => [root, ...(branches ?? [])]);
  const staleness = applyStaleness(rollouts, policyVersion, input.staleness);
  const stats = computeAdvantages(
    rollouts.map((r) => r.reward),
    rollouts.map((r) => r.valid),
    input.scaleAdvantagesByStd,
  );
  rollouts.forEach((r, i) => (r.advantage = stats.advantages[i] ?? null));
  if (input.branching) siblingAdvantages(rollouts, input.scaleAdvantagesByStd).forEach((s, i) => (rollouts[i] as RolloutResult).siblingAdvantages = s);
  const validCount = rollouts.filter((r) => r.valid).length;

  let status: GroupStatus = 'complete';
  let statusReason = '';
  const taskFailure = rollouts.find((r) => r.outcomeClass === 'task');
  const infraFailure = rollouts.find((r) => r.outcomeClass === 'infra' && !r.valid);
  if (taskFailure && input.failurePolicy.task === 'fail_group') {
    status = 'task_invalid';
    statusReason = taskFailure.attemptHistory.at(-1)?.message ?? taskFailure.outcomeType;
  } else if (infraFailure && input.failurePolicy.infra.onExhausted === 'fail_group') {
    status = 'failed';
    statusReason = `rollout ${infraFailure.index}: ${infraFailure.attemptHistory.at(-1)?.message ?? infraFailure.outcomeType}`;
  } else if (staleness.dropped) {
    status = 'stale';
    statusReason = staleness.dropped;
  } else if (validCount < input.minValid) {
    status = 'insufficient';
    statusReason = `${validCount} valid rollouts, fewer than minValid ${input.minValid}`;
  }
  // The guard on masking: a group whose baseline lost more than maxMaskedFraction is not trusted.
  const maxMasked = input.failurePolicy.maxMaskedFraction ?? 1;
  const masked = { ...maskedSummary(rollouts), maxFraction: maxMasked };
  if (status === 'complete' && masked.fraction > maxMasked) {
    status = 'insufficient';
    statusReason = `masked ${describeMasked(masked, rollouts.length)}, more than failurePolicy.maxMaskedFraction ${maxMasked}`;
  }
  const maskedCounter = metricMeter.createCounter(METRIC.maskedRollouts, undefined, 'Rollouts masked out of their group baseline');
  for (const r of rollouts) if (!r.valid) maskedCounter.add(1, { outcome_class: r.outcomeClass, outcome_type: r.outcomeType });
  metricMeter.createHistogram(METRIC.groupMaskedFraction, 'float', undefined, 'Fraction of each finished group that was masked').record(masked.fraction, { status });

  return {
    batchId: input.batchId,
    taskId: input.task.id,
    taskVersion: input.task.version,
    workflowId: workflowInfo().workflowId,
    status,
    statusReason,
    groupSize: input.groupSize,
    validCount,
    meanReward: stats.mean,
    stdReward: stats.std,
    masked,
    rollouts,
    policyVersion,
  };
}
