/**
 * How `rollout task check` runs a script as the agent would have (the reference solution, a
 * known-bad one), in one place for every part of the check: the reference cases and the red team's
 * survey run it the same way, in a sandbox of the same spec (the task's network, image and agent
 * tooling), so their verdicts are about the same run. As Harbor's oracle, the script's exit status
 * decides nothing: the tests score what it left (a solution whose last command is missing still did
 * its work); only running past the agent's timeout is an error.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sandboxSpecForTask } from '../../images/sandboxSpecForTask.js';
import type { TaskImage } from '../../images/taskImage.js';
import { uploadDirectory } from '../../sandboxes/uploadDirectory.js';
import type { ExecResult, SandboxHandle, SandboxProvider, SandboxSpec } from '../../shared/sandbox.js';
import type { LoadedTask } from '../../shared/task.js';

/** The sandbox every run of the check starts from: the task's own spec, as a rollout's. */
export function checkSandboxSpec(task: LoadedTask, provider: Pick<SandboxProvider, 'name'>, image: TaskImage | undefined, purpose: string, workflowId: string, attempt: number): SandboxSpec {
  return sandboxSpecForTask(task, { workflowId, runId: '', attempt }, { purpose }, provider.name === 'kubernetes', image);
}

/** Runs `script` (the task's solution/solve.sh with its folder, or another script in its place) at the sandbox's working directory. */
export async function runSolutionScript(provider: SandboxProvider, handle: SandboxHandle, task: LoadedTask, script: string): Promise<ExecResult> {
  if (script === task.solutionScript) await uploadDirectory(provider, handle, join(task.dir, 'solution'), '/solution');
  else await provider.writeFile(handle, '/solution/solve.sh', readFileSync(script));
  // The sandbox's working directory: an image's WORKDIR when task.toml names none (task.workdir is then /app).
  const run = await provider.exec(handle, 'bash /solution/solve.sh', { timeoutMs: task.agentTimeoutSec * 1000, env: task.config.solution.env, cwd: handle.workdir });
  if (run.timedOut) throw new Error(`${script} ran past the agent timeout (${task.agentTimeoutSec} s)`);
  return run;
}

/** The last lines of what a run printed, for a report. */
export function solutionTail(run: ExecResult, lines = 10): string {
  return `${run.stdout}\n${run.stderr}`.trim().split('\n').slice(-lines).join('\n');
}
