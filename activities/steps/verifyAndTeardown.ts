/**
 * verifyAttempt, teardownSandbox and verifyThenTeardown: the verdict on an attempt (in place beside
 * the agent, or in a clean room), and the sandbox's end. A verifier that failed is attributed by a
 * control run on the untouched start; the verdict is recorded before the workflow hears of it.
 */
import { ClassifiedError, failureName } from '../../shared/failures.js';
import type { TeardownReport } from '../../shared/sandbox.js';
import { activityLog } from '../activityLog.js';
import { attributeVerifyFailure } from '../../verifier/attribution/attributeFailure.js';
import type { TeardownInput, VerifyInput, VerifyOutput, VerifyThenTeardownOutput } from '../contract.js';
import { taskEnvironment } from '../../images/taskEnvironment.js';
import { withHeartbeats } from '../heartbeats.js';
import { sandboxSpecForTask } from '../../images/sandboxSpecForTask.js';
import { verifyCleanRoom, verifyInPlace } from '../../verifier/runVerifier.js';
import { taskOfGroup, type ActivityContext } from './activityContext.js';

export async function verifyAttempt(ctx: ActivityContext, input: VerifyInput): Promise<VerifyOutput> {
  const { deps } = ctx;
  const task = taskOfGroup(ctx.tasks, input.group);
  const started = performance.now();
  const isKubernetes = deps.provider.name === 'kubernetes';
  const outcome = await withHeartbeats(async () => {
    const environment = await taskEnvironment(task, deps.provider.name);
    const options = environment.verify;
    try {
      return await (input.group.verifyMode === 'clean-room'
        ? verifyCleanRoom(deps.provider, input.handle, task, sandboxSpecForTask(task, { workflowId: `${input.trajectoryRef}/clean-room`, runId: '', attempt: input.attempt }, {}, isKubernetes, environment.image), options)
        : verifyInPlace(deps.provider, input.handle, task, options));
    } catch (err) {
      // A verifier that crashed or timed out: the control on the untouched start says whose doing it was.
      const controlSpec = sandboxSpecForTask(task, { workflowId: `${input.trajectoryRef}/verifier-control`, runId: '', attempt: input.attempt }, {}, isKubernetes, environment.image);
      const attributed = await attributeVerifyFailure(err, task, ctx.controls, controlSpec, options);
      await ctx.recordAttribution(input.trajectoryRef, input.attempt, 'verify', attributed);
      if (attributed instanceof ClassifiedError && attributed.evidence.length > 0) activityLog(deps.logger, input).warn({ failure: failureName(attributed), evidence: attributed.evidence }, 'verifier failed: attributed');
      throw attributed;
    }
  });
  const verifyMs = performance.now() - started;
  await deps.store.put(input.trajectoryRef, `attempt-${String(input.attempt).padStart(2, '0')}/verify.json`, { ...outcome, verifyMs });
  activityLog(deps.logger, input).info({ reward: outcome.reward, mode: outcome.mode, verifyMs: Math.round(verifyMs) }, 'verified');
  return { reward: outcome.reward, metrics: outcome.metrics, mode: outcome.mode, verifyMs };
}

export async function teardownSandbox({ deps, countSandboxes }: ActivityContext, input: TeardownInput): Promise<TeardownReport & { teardownMs: number }> {
  const { handle } = input;
  const started = performance.now();
  // Heartbeats: a worker that dies mid-teardown is noticed within the heartbeat timeout and the
  // teardown retried on a live worker, not after its whole start-to-close timeout (2 minutes).
  const report = await withHeartbeats(() => deps.provider.teardown(handle));
  const teardownMs = performance.now() - started;
  activityLog(deps.logger, input).info({ sandbox: handle.id, teardownMs: Math.round(teardownMs) }, 'sandbox torn down');
  await countSandboxes();
  return { ...report, teardownMs };
}

/**
 * The verdict and then the teardown, in one activity on the sandbox's host: one server round trip
 * instead of two. A verify that fails tears nothing down (its retry needs the sandbox; the workflow's
 * teardown follows the last try), and a teardown that fails here is left to the workflow's.
 */
export async function verifyThenTeardown(ctx: ActivityContext, input: VerifyInput): Promise<VerifyThenTeardownOutput> {
  // A retry after the verdict was recorded (its worker died before the server heard back, perhaps
  // after the teardown) returns that verdict: the sandbox may be gone, the verdict is not.
  const recorded = await ctx.deps.store.get<VerifyOutput>(input.trajectoryRef, `attempt-${String(input.attempt).padStart(2, '0')}/verify.json`);
  const verdict = recorded ? { reward: recorded.reward, metrics: recorded.metrics, mode: recorded.mode, verifyMs: recorded.verifyMs } : await verifyAttempt(ctx, input);
  try {
    const { teardownMs } = await teardownSandbox(ctx, { handle: input.handle, trajectoryRef: input.trajectoryRef, attempt: input.attempt });
    return { ...verdict, teardown: { done: true, teardownMs } };
  } catch (err) {
    return { ...verdict, teardown: { done: false, error: err instanceof Error ? err.message : String(err) } };
  }
}
