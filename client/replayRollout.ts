/**
 * Rollout replay: re-executes the recorded tool calls of a finished rollout's
 * last attempt in a fresh sandbox, without the model, verifies again and says
 * whether the reward reproduces. A reward that reproduces is the model's; one
 * that does not points at the environment (non-determinism) or infra.
 */
import type { Client } from '@temporalio/client';
import { executeToolCall } from '../agent/executeTool.js';
import { taskEnvironment } from '../images/taskEnvironment.js';
import { loadTask } from '../tasks/loadTask.js';
import { withNetwork } from '../tasks/taskNetwork.js';
import { sandboxSpecForTask } from '../images/sandboxSpecForTask.js';
import type { TrajectoryStore } from '../stores/trajectoryStore.js';
import { verifyCleanRoom, verifyInPlace } from '../verifier/runVerifier.js';
import type { RolloutResult } from '../shared/pipeline.js';
import type { SandboxProvider } from '../shared/sandbox.js';
import { loadAttempt } from './loadTrajectory.js';

export interface ReplayedAction {
  turn: number;
  call: string;
  originalExitCode: number | null;
  replayedExitCode: number | null;
}

export interface RolloutReplay {
  workflowId: string;
  attempt: number;
  originalReward: number | null;
  replayedReward: number;
  reproduced: boolean;
  actions: ReplayedAction[];
  /** Actions whose exit code differs between the original and the replay. */
  divergent: ReplayedAction[];
}

export class ReplayError extends Error {
  override readonly name = 'ReplayError';
}

export async function replayRollout(options: { client: Client; store: TrajectoryStore; provider: SandboxProvider; workflowId: string }): Promise<RolloutReplay> {
  const { client, store, provider, workflowId } = options;
  const original = (await client.workflow.getHandle(workflowId).result()) as RolloutResult;
  if (!original.experiment) throw new ReplayError(`${workflowId} has no experiment record (no attempt reached a sandbox); nothing to replay`);
  const attemptIndex = original.attempts - 1;
  // An earlier attempt whose provision failed has nothing in the store; the last one is read directly.
  const attempt = await loadAttempt(store, original.trajectoryRef, attemptIndex);
  if (!attempt) throw new ReplayError(`no trajectory for ${workflowId} attempt ${attemptIndex} under ${store.locate(original.trajectoryRef)}; pass the trajectory store the workers used`);
  if (!original.experiment.taskDir) throw new ReplayError(`${workflowId} ran before experiment records named the task directory; it cannot be replayed`);
  const task = loadTask(original.experiment.taskDir);
  if (task.version !== original.experiment.taskVersion) {
    throw new ReplayError(`${task.dir} changed since the rollout ran (version ${original.experiment.taskVersion.slice(0, 12)} → ${task.version.slice(0, 12)}); restore the task files to replay`);
  }

  // On what the rollout ran on: the task's image (a Dockerfile task has no sandbox without it) and its network.
  const recordedNetwork = original.experiment.network?.mode;
  const asRun = withNetwork(task, recordedNetwork, `the network ${workflowId} ran with`);
  const environment = await taskEnvironment(asRun, provider.name);
  const spec = sandboxSpecForTask(asRun, { workflowId: `replay/${workflowId}`, runId: '', attempt: attemptIndex }, { purpose: 'replay' }, provider.name === 'kubernetes', environment.image);
  const { handle } = await provider.provision(spec);
  const actions: ReplayedAction[] = [];
  let replayedReward: number;
  try {
    for (const [turnIndex, turn] of attempt.turns.entries()) {
      for (const recorded of turn.tools) {
        const call = turn.policy.assistant.tool_calls?.[recorded.callIndex];
        if (!call) continue;
        const result = await executeToolCall(provider, handle, call, {
          // The sandbox's: an image's WORKDIR when task.toml names none.
          workdir: handle.workdir,
          commandTimeoutSec: original.experiment.limits.commandTimeoutSec,
          maxOutputBytes: original.experiment.limits.maxOutputBytes,
          remainingMs: original.experiment.limits.agentTimeoutSec * 1000,
        });
        actions.push({ turn: turnIndex, call: `${call.function.name} ${call.function.arguments.slice(0, 80)}`, originalExitCode: recorded.exitCode, replayedExitCode: result.exitCode });
      }
    }
    const verified =
      original.experiment.verifyMode === 'clean-room'
        ? await verifyCleanRoom(provider, handle, asRun, spec, environment.verify)
        : await verifyInPlace(provider, handle, asRun, environment.verify);
    replayedReward = verified.reward;
  } finally {
    await provider.teardown(handle);
  }
  const divergent = actions.filter((a) => a.originalExitCode !== a.replayedExitCode);
  return { workflowId, attempt: attemptIndex, originalReward: original.reward, replayedReward, reproduced: original.reward === replayedReward, actions, divergent };
}
