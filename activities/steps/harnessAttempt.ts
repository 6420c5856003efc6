/**
 * runHarness: the harness policy's agent stage. A published harness runs on this host against a
 * capture endpoint for the attempt; its model calls are recorded as turns, its commands as tool calls
 * (harnesses/).
 */
import type { HarnessRunInput, HarnessRunOutput } from '../../harnesses/runHarness.js';
import { runHarness } from '../../harnesses/runHarness.js';
import { taskOfGroup, type ActivityContext } from './activityContext.js';

export async function runHarnessAttempt(ctx: ActivityContext, input: HarnessRunInput): Promise<HarnessRunOutput> {
  const { deps } = ctx;
  const task = taskOfGroup(ctx.tasks, input.group);
  try {
    return await runHarness({ provider: deps.provider, store: deps.store, logger: deps.logger, host: deps.host, client: ctx.policyClient(input.group.policy), task, metrics: ctx.metrics }, input);
  } catch (err) {
    await ctx.recordAttribution(input.trajectoryRef, input.attempt, 'harness', err);
    throw err;
  }
}
