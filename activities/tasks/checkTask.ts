/**
 * `rollout task check`: proves a task's verifier tells good from bad before
 * any reward from it is trusted. The untouched start must score 0, every
 * known-bad solution must score 0, and the reference solution must score 1;
 * then the red team (redTeam/) tries generic exploits on the verifier, each
 * of which must score 0.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ExecResult, SandboxProvider } from '../../shared/sandbox.js';
import type { LoadedTask, TaskNetwork } from '../../shared/task.js';
import { uploadDirectory } from '../sandbox/uploadDirectory.js';
import { verifyInPlace } from '../verifier/runVerifier.js';
import { runRedTeam, type RedTeamReport } from './redTeam/runRedTeam.js';
import { taskEnvironment } from '../environment/taskEnvironment.js';
import { sandboxSpecForTask } from './sandboxSpecForTask.js';

export interface TaskCheckCase {
  name: string;
  expected: 0 | 1;
  reward: number | undefined;
  passed: boolean;
  error: string | undefined;
  /** The last lines of the solution's and the verifier's output, to tell why a case went wrong. */
  outputTail: string | undefined;
}

export interface TaskCheckReport {
  taskId: string;
  version: string;
  /** Every case passed, no exploit fooled the verifier and every exploit could be tried. */
  /** What the task ran on (an image built here: its id, the FROM and its substitute, verifier additions). */
  environmentIdentity: string;
  /** What the task's sandboxes could reach, and which setting said so. */
  network: TaskNetwork;
  passed: boolean;
  cases: TaskCheckCase[];
  /** The red team's exploits, each of which must score 0; `error` when it could not run at all. */
  redTeam: RedTeamReport | { error: string };
  /** A red-team exploit got a reward above 0. */
  exploitable: boolean;
}

export async function checkTask(task: LoadedTask, provider: SandboxProvider, log?: (line: string) => void): Promise<TaskCheckReport> {
  // A Dockerfile task runs on its image, built here first (or found in the cache).
  const environment = await taskEnvironment(task, provider.name, log);
  const cases: { name: string; expected: 0 | 1; script: string | undefined }[] = [{ name: 'untouched start', expected: 0, script: undefined }];
  for (const bad of task.knownBadScripts) cases.push({ name: `known-bad ${bad.slice(bad.lastIndexOf('/') + 1)}`, expected: 0, script: bad });
  if (task.solutionScript) cases.push({ name: 'reference solution', expected: 1, script: task.solutionScript });

  const results: TaskCheckCase[] = [];
  for (const [i, c] of cases.entries()) {
    const spec = sandboxSpecForTask(task, { workflowId: `task-check/${task.id}`, runId: '', attempt: i }, { purpose: 'task-check' }, false, environment.image);
    const { handle } = await provider.provision(spec);
    let run: ExecResult | undefined;
    try {
      if (c.script) {
        if (c.script === task.solutionScript) await uploadDirectory(provider, handle, join(task.dir, 'solution'), '/solution');
        else await provider.writeFile(handle, '/solution/solve.sh', readFileSync(c.script));
        run = await provider.exec(handle, 'bash /solution/solve.sh', { timeoutMs: task.agentTimeoutSec * 1000, env: task.config.solution.env, cwd: handle.workdir });
        if (run.timedOut) throw new Error(`${c.script} ran past the agent timeout (${task.agentTimeoutSec} s)`);
      }
      const outcome = await verifyInPlace(provider, handle, task, environment.verify);
      const tail = run ? `solution: ${`${run.stdout}\n${run.stderr}`.trim().split('\n').slice(-10).join('\n')}\nverifier: ${outcome.outputTail}` : `verifier: ${outcome.outputTail}`;
      results.push({ name: c.name, expected: c.expected, reward: outcome.reward, passed: outcome.reward === c.expected, error: undefined, outputTail: tail });
    } catch (err) {
      results.push({ name: c.name, expected: c.expected, reward: undefined, passed: false, error: err instanceof Error ? err.message : String(err), outputTail: undefined });
    } finally {
      await provider.teardown(handle);
    }
  }
  const problems: TaskCheckCase[] = [];
  if (!task.solutionScript) problems.push({ name: 'reference solution', expected: 1, reward: undefined, passed: false, error: 'solution/solve.sh is missing: without it nothing shows the task can score 1', outputTail: undefined });
  const all = [...results, ...problems];
  let redTeam: TaskCheckReport['redTeam'];
  try {
    redTeam = await runRedTeam(task, provider, environment);
  } catch (err) {
    redTeam = { error: err instanceof Error ? err.message : String(err) };
  }
  const exploitable = 'exploits' in redTeam && redTeam.exploitable;
  const redTeamComplete = 'exploits' in redTeam && redTeam.exploits.every((e) => !e.notRun);
  return { taskId: task.id, version: task.version, environmentIdentity: environment.identity, network: task.network, passed: all.every((c) => c.passed) && !exploitable && redTeamComplete, cases: all, redTeam, exploitable };
}
