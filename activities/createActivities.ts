/**
 * The pipeline's activities, composed from their files in activities/steps/ (one per concern: the
 * provision, the policy step, the calls on the sandbox's host, restore, the harness, the reaper)
 * around what a worker's activities share (activities/steps/activityContext.ts: the sandbox
 * provider, the trajectory store, policy clients, steps in flight, the task cache). Tests inject
 * real but small dependencies. Which worker registers which activity is the worker's business
 * (workers/pipelineWorkers.ts): provisioning on the main queue, tool calls / verify / teardown on
 * the sandbox host's own queue, policy steps on the rate-limited policy queue. Their inputs and
 * outputs are in contract.ts.
 */
import type { TaskRef, TaskRequest } from '../shared/task.js';
import type { TeardownReport } from '../shared/sandbox.js';
import type {
  PolicyStepInput,
  PolicyStepOutput,
  ProvisionInput,
  ProvisionOutput,
  TeardownInput,
  ToolCallsStepInput,
  ToolCallsStepOutput,
  ToolStepInput,
  ToolStepOutput,
  VerifyInput,
  VerifyOutput,
  VerifyThenTeardownOutput,
} from './contract.js';
import type { HarnessRunInput, HarnessRunOutput } from '../harnesses/runHarness.js';
import type { ReapReport } from '../sandboxes/reaper/reapSandboxes.js';
import type { RestoreTurnsInput, RestoreTurnsOutput } from '../resume/restoreTurns.js';
import type { RolloutRecord } from '../stores/trajectoryStore.js';
import { createActivityContext, type ActivityDeps } from './steps/activityContext.js';
import { runHarnessAttempt } from './steps/harnessAttempt.js';
import { policyStep } from './steps/policyStep.js';
import { provisionSandbox } from './steps/provisionSandbox.js';
import { reapPass } from './steps/reapPass.js';
import { resolveTask } from './steps/resolveTask.js';
import { restoreAttemptTurns } from './steps/restoreAttemptTurns.js';
import { runTool, runTools, teardownSandbox, verifyAttempt, verifyThenTeardown, watchHost } from './steps/onSandboxHost.js';

export type { ActivityDeps } from './steps/activityContext.js';

export function createActivities(deps: ActivityDeps) {
  const ctx = createActivityContext(deps);
  return {
    resolveTask: async (request: TaskRequest): Promise<TaskRef> => resolveTask(ctx, request),
    provisionSandbox: (input: ProvisionInput): Promise<ProvisionOutput> => provisionSandbox(ctx, input),
    policyStep: (input: PolicyStepInput): Promise<PolicyStepOutput> => policyStep(ctx, input),
    runTool: (input: ToolStepInput): Promise<ToolStepOutput> => runTool(ctx, input),
    runHarness: (input: HarnessRunInput): Promise<HarnessRunOutput> => runHarnessAttempt(ctx, input),
    runTools: (input: ToolCallsStepInput): Promise<ToolCallsStepOutput> => runTools(ctx, input),
    verifyAttempt: (input: VerifyInput): Promise<VerifyOutput> => verifyAttempt(ctx, input),
    restoreTurns: (input: RestoreTurnsInput): Promise<RestoreTurnsOutput> => restoreAttemptTurns(ctx, input),
    verifyThenTeardown: (input: VerifyInput): Promise<VerifyThenTeardownOutput> => verifyThenTeardown(ctx, input),
    /** Keeps the finished rollout (outcome, reward, experiment record) in the store, queryable by batch, task and outcome. */
    recordRollout: async (record: RolloutRecord): Promise<void> => {
      await deps.store.putRollout(record);
    },
    reapSandboxes: (options: { dryRun: boolean }): Promise<ReapReport> => reapPass(ctx, options),
    teardownSandbox: (input: TeardownInput): Promise<TeardownReport & { teardownMs: number }> => teardownSandbox(ctx, input),
    watchHost,
  };
}

export type PipelineActivities = ReturnType<typeof createActivities>;
