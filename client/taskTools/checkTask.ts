/**
 * `rollout task check`: proves a task's verifier tells good from bad before
 * any reward from it is trusted. The untouched start must score 0, every
 * known-bad solution must score 0, and the reference solution must score 1;
 * then the red team (redTeam/) tries generic exploits on the verifier, each
 * of which must score 0, each within a budget taken from the honest runs
 * (past it: inconclusive). A task with the internet also has its reference
 * solution verified with the network cut, to say whether the verdict depends
 * on the outside world. Sandboxes run side by side (`jobs`).
 */
import type { ExecResult, SandboxProvider } from '../../shared/sandbox.js';
import type { LoadedTask, TaskNetwork } from '../../shared/task.js';
import { verifyByMode, type VerifyMode } from '../../verifier/runVerifier.js';
import { exploitBudgetSec, runRedTeam, type RedTeamReport } from './redTeam/runRedTeam.js';
import { checkSandboxSpec, runSolutionScript, solutionTail } from './solutionRun.js';
import { taskEnvironment, type TaskEnvironment } from '../../images/taskEnvironment.js';
import { ClassifiedError, failureName } from '../../shared/failures.js';
import { mapConcurrently } from '../../shared/mapConcurrently.js';
import { unreachableHosts, type OutsideWorldNeed } from '../../tasks/outsideWorld.js';
import { DEBIAN_SNAPSHOT_HOST, missingAptVersions } from '../../images/aptPins.js';

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
  /** What the task ran on (an image built here: its id, the FROM and its substitute, verifier additions). */
  environmentIdentity: string;
  /** What the task's sandboxes could reach, and which setting said so. */
  network: TaskNetwork;
  /** Where every case's and exploit's tests ran: in the sandbox the solution ran in (beside it), or in a clean room holding only its workspace. */
  verifyMode: VerifyMode;
  /**
   * A public task's reference solution verified once more with the sandbox's network cut just before the
   * tests: whether the verdict depends on the outside world. Undefined for a task without network.
   */
  offlineVerifier: OfflineVerifierCheck | undefined;
  /** Why the task's environment could not be made (its image build failed): then nothing else ran. */
  environmentError?: string;
  /**
   * The task failed here because its build, reference solution or verifier reaches for hosts beyond the
   * package registries this machine serves (outsideWorld.ts): not the task's failure nor the pipeline's.
   */
  needsInternet?: OutsideWorldNeed;
  /** Every case passed, no exploit fooled the verifier and every exploit could be tried. */
  passed: boolean;
  cases: TaskCheckCase[];
  /** The red team's exploits, each of which must score 0; `error` when it could not run at all. */
  redTeam: RedTeamReport | { error: string };
  /** A red-team exploit got a reward above 0. */
  exploitable: boolean;
  timings: TaskCheckTimings;
}

export interface OfflineVerifierCheck {
  /** true: the reference solution scores 1 only with the network; false: offline too; undefined: not judged (why in note). */
  needsNetwork: boolean | undefined;
  reward: number | undefined;
  note: string;
}

export interface TaskCheckTimings {
  /** The image's build, when the task has a Dockerfile and the provider builds it here (cached: built earlier). */
  build: { seconds: number; cached: boolean } | undefined;
  /** The whole check, the build included. */
  checkSeconds: number;
  /** The longest an exploit's verification may run before it is called inconclusive. */
  exploitBudgetSeconds: number;
}

export interface TaskCheckOptions {
  log?: (line: string) => void;
  /** Sandboxes run side by side (the cases, then the exploits); default 2. */
  jobs?: number;
  /** Where the tests run, as a batch's verifyMode (default in-place, Harbor's way). */
  verifyMode?: VerifyMode;
}

interface CaseRun extends TaskCheckCase {
  verifySec: number | undefined;
  /** Hosts beyond the registries the solution's and the verifier's output say were out of reach. */
  unreachable: { oracle: string[]; verifier: string[] };
}

export async function checkTask(task: LoadedTask, provider: SandboxProvider, options: TaskCheckOptions = {}): Promise<TaskCheckReport> {
  const started = performance.now();
  const jobs = options.jobs ?? 2;
  const verifyMode = options.verifyMode ?? 'in-place';
  // A Dockerfile task runs on its image, built here first (or found in the cache). One that cannot be
  // built is this task's verdict, not the end of a check over a collection.
  let environment: TaskEnvironment;
  try {
    environment = await taskEnvironment(task, provider.name, options.log);
  } catch (err) {
    if (!(err instanceof ClassifiedError) || err.failureClass !== 'infra') throw err;
    const environmentError = `${failureName(err)}: ${err.message}`;
    const hosts = unreachableHosts(err.message);
    return {
      ...(hosts.length > 0 ? { needsInternet: { hosts, stage: 'build' as const } } : {}),
      taskId: task.id,
      version: task.version,
      environmentIdentity: 'not built',
      network: task.network,
      verifyMode,
      offlineVerifier: undefined,
      environmentError,
      passed: false,
      cases: [],
      redTeam: { error: 'not run: the environment could not be built' },
      exploitable: false,
      timings: { build: undefined, checkSeconds: (performance.now() - started) / 1000, exploitBudgetSeconds: task.verifierTimeoutSec },
    };
  }
  const cases: { name: string; expected: 0 | 1; script: string | undefined; offline?: true }[] = [{ name: 'untouched start', expected: 0, script: undefined }];
  for (const bad of task.knownBadScripts) cases.push({ name: `known-bad ${bad.slice(bad.lastIndexOf('/') + 1)}`, expected: 0, script: bad });
  if (task.solutionScript) cases.push({ name: 'reference solution', expected: 1, script: task.solutionScript });
  // Whether the verdict needs the outside world: the same solution, the network cut before the tests.
  const probeOffline = task.network.mode === 'public' && task.solutionScript !== undefined && provider.disconnectNetwork !== undefined;
  if (probeOffline) cases.push({ name: 'reference solution, tests offline', expected: 1, script: task.solutionScript, offline: true });

  // TB2's test.sh curls astral.sh for uv's installer; an image built here has uv from PyPI instead.
  const provided = environment.verify.env?.UV_FIND_LINKS ? ['astral.sh'] : [];
  // An apt-get of a version pinned from the original image's archive (Ubuntu's), which the Debian stand-in lacks,
  // or of one Debian's mirror no longer serves (an archive snapshot has it).
  const archive = environment.image ? (environment.image.bases.find((b) => b.originalArchive)?.originalArchive ?? DEBIAN_SNAPSHOT_HOST) : undefined;
  const pinnedFromArchive = (output: string): string[] => (archive && missingAptVersions(output).length > 0 ? [archive] : []);
  const runs = await mapConcurrently(cases, jobs, async (c, i): Promise<CaseRun> => {
    const spec = checkSandboxSpec(task, provider, environment.image, 'task-check', `task-check/${task.id}`, i);
    const { handle } = await provider.provision(spec);
    let run: ExecResult | undefined;
    try {
      if (c.script) run = await runSolutionScript(provider, handle, task, c.script);
      if (c.offline) await provider.disconnectNetwork?.(handle);
      // Offline in a clean room: the room itself gets no network.
      const outcome = await verifyByMode(verifyMode, provider, handle, task, c.offline ? { ...spec, network: 'none' } : spec, environment.verify);
      const tail = run ? `solution (exit ${run.exitCode}): ${solutionTail(run)}\nverifier: ${outcome.outputTail}` : `verifier: ${outcome.outputTail}`;
      const unreachable = {
        oracle: run ? [...unreachableHosts(`${run.stdout}\n${run.stderr}`, provided), ...pinnedFromArchive(`${run.stdout}\n${run.stderr}`)] : [],
        verifier: unreachableHosts(outcome.outputTail, provided),
      };
      return {
        name: c.name,
        expected: c.expected,
        reward: outcome.reward,
        passed: outcome.reward === c.expected,
        error: undefined,
        outputTail: tail,
        verifySec: outcome.durationMs / 1000,
        unreachable,
      };
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      return {
        name: c.name,
        expected: c.expected,
        reward: undefined,
        passed: false,
        error,
        outputTail: undefined,
        verifySec: undefined,
        unreachable: { oracle: [], verifier: unreachableHosts(error, provided) },
      };
    } finally {
      await provider.teardown(handle);
    }
  });
  const offlineRun = probeOffline ? runs.pop() : undefined;
  const results: TaskCheckCase[] = runs.map(({ verifySec: _, unreachable: __, ...c }) => c);
  // A reference solution that fails while its output names hosts out of reach: the outside world, not the task.
  const oracle = runs.find((r) => r.name === 'reference solution');
  const needsInternet: OutsideWorldNeed | undefined =
    oracle && !oracle.passed
      ? oracle.unreachable.oracle.length > 0
        ? { hosts: oracle.unreachable.oracle, stage: 'oracle' }
        : oracle.unreachable.verifier.length > 0
          ? { hosts: oracle.unreachable.verifier, stage: 'verifier' }
          : undefined
      : undefined;
  const problems: TaskCheckCase[] = [];
  if (!task.solutionScript)
    problems.push({
      name: 'reference solution',
      expected: 1,
      reward: undefined,
      passed: false,
      error: 'solution/solve.sh is missing: without it nothing shows the task can score 1',
      outputTail: undefined,
    });
  const all = [...results, ...problems];

  const honest = runs.flatMap((r) => (r.verifySec === undefined ? [] : [r.verifySec]));
  const exploitBudgetSeconds = exploitBudgetSec(task, honest);
  let redTeam: TaskCheckReport['redTeam'];
  try {
    redTeam = await runRedTeam(task, provider, environment, { budgetSec: exploitBudgetSeconds, jobs, verifyMode });
  } catch (err) {
    redTeam = { error: err instanceof Error ? err.message : String(err) };
  }
  const exploitable = 'exploits' in redTeam && redTeam.exploitable;
  const redTeamComplete = 'exploits' in redTeam && redTeam.exploits.every((e) => !e.notRun);
  const build = environment.build ? { seconds: environment.build.builtMs / 1000, cached: environment.build.cacheHit } : undefined;
  return {
    taskId: task.id,
    version: task.version,
    environmentIdentity: environment.identity,
    network: task.network,
    verifyMode,
    offlineVerifier: task.network.mode === 'public' ? offlineVerdict(offlineRun, results.find((r) => r.name === 'reference solution'), provider) : undefined,
    ...(needsInternet ? { needsInternet } : {}),
    passed: all.every((c) => c.passed) && !exploitable && redTeamComplete,
    cases: all,
    redTeam,
    exploitable,
    timings: { build, checkSeconds: (performance.now() - started) / 1000, exploitBudgetSeconds },
  };
}

/** What the offline run says about the verifier, read against the online one. */
function offlineVerdict(offline: CaseRun | undefined, online: TaskCheckCase | undefined, provider: SandboxProvider): OfflineVerifierCheck {
  if (!offline) {
    const why = !online ? 'the task has no reference solution' : `the ${provider.name} provider cannot cut a sandbox's network`;
    return { needsNetwork: undefined, reward: undefined, note: `not judged: ${why}` };
  }
  if (!online?.passed) return { needsNetwork: undefined, reward: offline.reward, note: 'not judged: the reference solution does not score 1 with the network either' };
  if (offline.reward === 1) return { needsNetwork: false, reward: 1, note: 'the reference solution scores 1 with the network cut before the tests: the verdict does not depend on the outside world' };
  const got = offline.reward === undefined ? `no reward (${offline.error ?? 'the verifier failed'})` : `reward ${offline.reward}`;
  return {
    needsNetwork: true,
    reward: offline.reward,
    note: `the reference solution scores 1 online but ${got} with the network cut before the tests: the verifier needs the outside world, so its verdict depends on it`,
  };
}
