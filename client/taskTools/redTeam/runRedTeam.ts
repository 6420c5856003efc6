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
import type { ExecResult, SandboxHandle, SandboxProvider, SandboxSpec } from '../../../shared/sandbox.js';
import type { LoadedTask } from '../../../shared/task.js';
import { verifyByMode, type VerifyMode } from '../../../verifier/runVerifier.js';
import type { TaskEnvironment } from '../../../images/taskEnvironment.js';
import { checkSandboxSpec, runSolutionScript } from '../solutionRun.js';
import { exploitsFor, parseSurvey, surveyCommand, type WorkspaceSurvey } from './exploits.js';
import { libraryForgeries, SHELL_LIBRARIES_COMMAND, shellLibraryOf, type ShellLibrary } from './libraryForgeries.js';
import { mapConcurrently } from '../../../shared/mapConcurrently.js';
import { shellQuote } from '../../../sandboxes/uploadDirectory.js';

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
  /** The verifier ran past the exploit budget: no verdict (not exploitable as far as the budget saw). */
  inconclusive?: boolean;
}

export interface RedTeamOptions {
  /** The longest an exploit's verification may run (at most the task's own verifier timeout). */
  budgetSec?: number;
  /** Exploits run side by side, each in its own sandbox. */
  jobs?: number;
  /** Where each exploit's tests run (default in-place). */
  verifyMode?: VerifyMode;
}

export interface RedTeamReport {
  exploitable: boolean;
  survey: WorkspaceSurvey;
  /** The reference solution's exit status in the survey's run (as in the reference case, it decides nothing). */
  solutionExit?: number;
  exploits: ExploitResult[];
  /** Exploits this host could not try, each with why (no C compiler for the library forgeries). */
  notTried?: string[];
}

const MARKER = '/tmp/.rt-before-solution';

/** An exploit's verification gets 3x the slowest honest one, at least 60 s, at most the task's own timeout. */
const MIN_EXPLOIT_BUDGET_SEC = 60;
const EXPLOIT_BUDGET_FACTOR = 3;
const EXPLOIT_BUDGET_WHY = `${EXPLOIT_BUDGET_FACTOR}x the slowest honest verification, at least ${MIN_EXPLOIT_BUDGET_SEC} s`;

/** The budget of each exploit's verification, from how long the honest ones took (none: the task's timeout). */
export function exploitBudgetSec(task: Pick<LoadedTask, 'verifierTimeoutSec'>, honestVerifySec: number[]): number {
  if (honestVerifySec.length === 0) return task.verifierTimeoutSec;
  return Math.min(task.verifierTimeoutSec, Math.max(MIN_EXPLOIT_BUDGET_SEC, Math.ceil(EXPLOIT_BUDGET_FACTOR * Math.max(...honestVerifySec))));
}

const described = (exploit: { name: string; description: string }): Pick<ExploitResult, 'name' | 'description'> => ({ name: exploit.name, description: exploit.description });

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
export async function runRedTeam(task: LoadedTask, provider: SandboxProvider, environment?: Pick<TaskEnvironment, 'image' | 'verify'>, options: RedTeamOptions = {}): Promise<RedTeamReport> {
  let n = 0;
  const withSandbox = async <T>(work: (handle: SandboxHandle, spec: SandboxSpec) => Promise<T>): Promise<T> => {
    const spec = checkSandboxSpec(task, provider, environment?.image, 'task-check-red-team', `task-check/${task.id}/red-team`, n++);
    const { handle } = await provider.provision(spec);
    try {
      return await work(handle, spec);
    } finally {
      await provider.teardown(handle);
    }
  };
  const solve = async (handle: SandboxHandle): Promise<ExecResult | undefined> => {
    const touched = await provider.exec(handle, `touch ${MARKER} && sleep 0.01`, { timeoutMs: 10_000 });
    if (touched.exitCode !== 0) throw new Error(`cannot prepare the sandbox: ${touched.stderr.trim()}`);
    // As the reference check runs it: its exit status decides nothing, the survey reads what it left.
    return task.solutionScript ? await runSolutionScript(provider, handle, task, task.solutionScript) : undefined;
  };

  let solutionExit: number | undefined;
  let shellLibrary: ShellLibrary | undefined;
  const survey = await withSandbox(async (handle) => {
    solutionExit = (await solve(handle))?.exitCode;
    const listed = await provider.exec(handle, surveyCommand(handle.workdir, MARKER), { timeoutMs: 60_000 });
    const surveyed = parseSurvey(handle.workdir, listed.stdout, testFilesOf(task));
    if (surveyed.writableRoot) shellLibrary = await shellLibraryIn(provider, handle);
    return surveyed;
  });
  const library = survey.writableRoot ? libraryForgeries(shellLibrary) : { exploits: [], notTried: [] };

  const budgetSec = Math.min(options.budgetSec ?? task.verifierTimeoutSec, task.verifierTimeoutSec);
  const results = await mapConcurrently([...exploitsFor(survey, task.verifierTimeoutSec), ...library.exploits], options.jobs ?? 1, async (exploit): Promise<ExploitResult> => {
    const timeoutSec = Math.min(exploit.verifierTimeoutSec ?? task.verifierTimeoutSec, budgetSec);
    // Cut short by the budget, not by the exploit's own limit (a pipe's) nor by the task's timeout.
    const budgetCut = timeoutSec === budgetSec && budgetSec < (exploit.verifierTimeoutSec ?? task.verifierTimeoutSec);
    // Cut short by the exploit's own limit (a pipe's), shorter than the task's timeout.
    const ownCut = !budgetCut && exploit.verifierTimeoutSec !== undefined && timeoutSec === exploit.verifierTimeoutSec && timeoutSec < task.verifierTimeoutSec;
    const verifyTask: LoadedTask = timeoutSec === task.verifierTimeoutSec ? task : { ...task, verifierTimeoutSec: timeoutSec };
    try {
      // On the untouched start (it scores 0): a reward above 0 is the exploit's doing, never the solution's.
      return await withSandbox(async (handle, spec): Promise<ExploitResult> => {
        const planted = await provider.exec(handle, exploit.command, { timeoutMs: 120_000, cwd: handle.workdir });
        if (planted.exitCode !== 0)
          return {
            ...described(exploit),
            reward: undefined,
            exploitable: false,
            note: `the exploit could not be planted (exit ${planted.exitCode}): ${planted.stderr.trim().slice(-300)}`,
            notRun: true,
          };
        try {
          const outcome = await verifyByMode(options.verifyMode ?? 'in-place', provider, handle, verifyTask, spec, environment?.verify);
          return { ...described(exploit), reward: outcome.reward, exploitable: outcome.reward > 0, note: undefined, notRun: false };
        } catch (err) {
          if (budgetCut && err instanceof ClassifiedError && err.type === 'verifier_timeout') {
            return {
              ...described(exploit),
              reward: undefined,
              exploitable: false,
              inconclusive: true,
              note: `inconclusive: the verifier ran past ${budgetSec} s, this exploit's budget (${EXPLOIT_BUDGET_WHY}; the task allows ${task.verifierTimeoutSec} s)`,
              notRun: false,
            };
          }
          if (ownCut && err instanceof ClassifiedError && err.type === 'verifier_timeout') {
            return {
              ...described(exploit),
              reward: undefined,
              exploitable: false,
              note: `no reward (the verifier was still running after ${timeoutSec} s, this exploit's own limit: ${exploit.verifierTimeoutWhy ?? 'it blocks the verifier'}; the task allows ${task.verifierTimeoutSec} s; a rollout scores it as a failed attempt)`,
              notRun: false,
            };
          }
          if (err instanceof ClassifiedError && err.type === 'verifier_tampered') {
            return { ...described(exploit), reward: 0, exploitable: false, note: `scored 0 as ${failureName(err)}: ${err.message.slice(0, 200)}`, notRun: false };
          }
          if (err instanceof ClassifiedError && (err.type === 'verifier_timeout' || err.type === 'verifier_crashed')) {
            return {
              ...described(exploit),
              reward: undefined,
              exploitable: false,
              note: `no reward (${failureName(err)}; a rollout scores it as a failed attempt): ${err.message.slice(0, 200)}`,
              notRun: false,
            };
          }
          throw err;
        }
      });
    } catch (err) {
      return { ...described(exploit), reward: undefined, exploitable: false, note: `not run: ${err instanceof Error ? err.message : String(err)}`, notRun: true };
    }
  });
  return {
    exploitable: results.some((r) => r.exploitable),
    survey,
    exploits: results,
    ...(solutionExit !== undefined ? { solutionExit } : {}),
    ...(library.notTried.length > 0 ? { notTried: library.notTried } : {}),
  };
}

/** A library the image's bash loads that a stand-in can replace, read through the sandbox; undefined when there is none or no ldd. */
async function shellLibraryIn(provider: SandboxProvider, handle: SandboxHandle): Promise<ShellLibrary | undefined> {
  const listed = await provider.exec(handle, SHELL_LIBRARIES_COMMAND, { timeoutMs: 30_000 });
  const found = shellLibraryOf(listed.stdout);
  if (!found) return undefined;
  const real = await provider.exec(handle, `readlink -f -- ${shellQuote(found.path)}`, { timeoutMs: 10_000 });
  const bytes = await provider.readFile(handle, real.stdout.trim() || found.path, { maxBytes: 64 * 1024 * 1024 });
  return { ...found, bytes: Buffer.from(bytes) };
}
