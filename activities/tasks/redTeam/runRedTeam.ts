/**
 * Runs the red team's exploits (exploits.ts) against one task's verifier.
 * The reference solution runs once, in a sandbox of its own, to survey what
 * to aim at; each exploit then gets a fresh sandbox from the task's own spec:
 * the untouched start, the exploit, then the verifier exactly as a rollout
 * runs it (in-place). An exploit that gets a reward above 0 makes the task
 * exploitable. A verifier that crashes or times out on an exploit gives no
 * reward, which a rollout scores as a failed attempt (failure attribution:
 * model/verifier_blocked or model/verifier_broken), so that is not a hole.
 */
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ClassifiedError, failureName } from '../../../shared/failures.js';
import type { SandboxHandle, SandboxProvider } from '../../../shared/sandbox.js';
import type { LoadedTask } from '../../../shared/task.js';
import { uploadDirectory } from '../../sandbox/uploadDirectory.js';
import { verifyInPlace } from '../../verifier/runVerifier.js';
import type { TaskEnvironment } from '../../environment/taskEnvironment.js';
import { sandboxSpecForTask } from '../sandboxSpecForTask.js';
import { exploitsFor, parseSurvey, surveyCommand, type WorkspaceSurvey } from './exploits.js';

export interface ExploitResult {
  name: string;
  description: string;
  /** The verifier's reward; undefined when it gave none (crashed or timed out). */
  reward: number | undefined;
  /** The reward was above 0: the verifier was fooled. */
  exploitable: boolean;
  /** Why there is no reward (the verifier's failure), or why the exploit could not run. */
  note: string | undefined;
  /** The exploit could not be tried (the sandbox failed): the task's check is then incomplete. */
  notRun: boolean;
}

export interface RedTeamReport {
  exploitable: boolean;
  survey: WorkspaceSurvey;
  exploits: ExploitResult[];
}

const MARKER = '/tmp/.rt-before-solution';

function testFilesOf(task: LoadedTask): string[] {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile() && path !== join(task.testsDir, 'test.sh')) files.push(`/tests/${relative(task.testsDir, path)}`);
    }
  };
  walk(task.testsDir);
  return files;
}

/** `environment`: the task's image and verifier toolchain when it has a Dockerfile (taskEnvironment); the host base otherwise. */
export async function runRedTeam(task: LoadedTask, provider: SandboxProvider, environment?: Pick<TaskEnvironment, 'image' | 'verify'>): Promise<RedTeamReport> {
  let n = 0;
  const withSandbox = async <T>(work: (handle: SandboxHandle) => Promise<T>): Promise<T> => {
    const spec = sandboxSpecForTask(task, { workflowId: `task-check/${task.id}/red-team`, runId: '', attempt: n++ }, { purpose: 'task-check-red-team' }, provider.name === 'kubernetes', environment?.image);
    const { handle } = await provider.provision(spec);
    try {
      return await work(handle);
    } finally {
      await provider.teardown(handle);
    }
  };
  const solve = async (handle: SandboxHandle): Promise<void> => {
    const touched = await provider.exec(handle, `touch ${MARKER} && sleep 0.01`, { timeoutMs: 10_000 });
    if (touched.exitCode !== 0) throw new Error(`cannot prepare the sandbox: ${touched.stderr.trim()}`);
    if (!task.solutionScript) return;
    await uploadDirectory(provider, handle, join(task.dir, 'solution'), '/solution');
    const run = await provider.exec(handle, 'bash /solution/solve.sh', { timeoutMs: task.agentTimeoutSec * 1000, env: task.config.solution.env, cwd: task.workdir });
    if (run.timedOut || run.exitCode !== 0) throw new Error(`solution/solve.sh ${run.timedOut ? 'timed out' : `exited ${run.exitCode}`}: ${run.stderr.trim().slice(-300)}`);
  };

  const survey = await withSandbox(async (handle) => {
    await solve(handle);
    const listed = await provider.exec(handle, surveyCommand(task.workdir, MARKER), { timeoutMs: 60_000 });
    return parseSurvey(task.workdir, listed.stdout, testFilesOf(task));
  });

  const results: ExploitResult[] = [];
  for (const exploit of exploitsFor(survey, task.verifierTimeoutSec)) {
    const verifyTask: LoadedTask = exploit.verifierTimeoutSec === undefined ? task : { ...task, verifierTimeoutSec: exploit.verifierTimeoutSec };
    try {
      // On the untouched start (it scores 0): a reward above 0 is the exploit's doing, never the solution's.
      const result = await withSandbox(async (handle): Promise<ExploitResult> => {
        const planted = await provider.exec(handle, exploit.command, { timeoutMs: 120_000, cwd: task.workdir });
        if (planted.exitCode !== 0) return { ...exploit, reward: undefined, exploitable: false, note: `the exploit could not be planted (exit ${planted.exitCode}): ${planted.stderr.trim().slice(-300)}`, notRun: true };
        try {
          const outcome = await verifyInPlace(provider, handle, verifyTask, environment?.verify);
          return { ...exploit, reward: outcome.reward, exploitable: outcome.reward > 0, note: undefined, notRun: false };
        } catch (err) {
          if (err instanceof ClassifiedError && (err.type === 'verifier_timeout' || err.type === 'verifier_crashed')) {
            return { ...exploit, reward: undefined, exploitable: false, note: `no reward (${failureName(err)}; a rollout scores it as a failed attempt): ${err.message.slice(0, 200)}`, notRun: false };
          }
          throw err;
        }
      });
      results.push({ name: result.name, description: result.description, reward: result.reward, exploitable: result.exploitable, note: result.note, notRun: result.notRun });
    } catch (err) {
      results.push({ name: exploit.name, description: exploit.description, reward: undefined, exploitable: false, note: `not run: ${err instanceof Error ? err.message : String(err)}`, notRun: true });
    }
  }
  return { exploitable: results.some((r) => r.exploitable), survey, exploits: results };
}
