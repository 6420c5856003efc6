/**
 * `rollout task check <dir>...`: runs each task's verifier on the untouched
 * start, every known-bad solution and the reference solution, in real local
 * sandboxes. Exit 0 when every task behaves, 1 when one does not, 2 when a
 * task directory is invalid.
 */
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { checkTask, type TaskCheckReport } from '../taskTools/checkTask.js';
import { describeOutsideWorldNeed } from '../../tasks/outsideWorld.js';
import { loadTask } from '../../tasks/loadTask.js';
import { ClassifiedError } from '../../shared/failures.js';
import type { NetworkMode } from '../../shared/task.js';
import { describeNetwork, parseNetworkMode, withNetwork } from '../../tasks/taskNetwork.js';
import { HelpRequested, parseCommandLine, wantsHelp } from './commandLine.js';
import { parseVerifyMode } from './verifyModeOption.js';
import { UsageError } from './usageError.js';
import { collectionTable } from '../report/taskCheckTable.js';

export const taskUsage = `rollout task check <task-dir>... [--network none|public] [--verify in-place|clean-room] [--jobs N] [--json]
  Runs the verifier on the untouched start (must score 0), every known-bad/*.sh
  (must score 0) and solution/solve.sh (must score 1), each in a fresh sandbox;
  then a red team of generic exploits (exit with success at load, expected
  outputs empty/huge/link/pipe, workspace emptied), each of which must score 0.
  A task whose verifier rewards an exploit is reported exploitable (exit 1).
  Each task's sandboxes get the network its task.toml gives (Harbor's rules: a
  task.toml that sets none gets the internet); the report says which and why.
  A task with the internet has its reference solution verified once more with
  the network cut before the tests: the report says whether the verifier needs
  the outside world to score. Each exploit's verification gets 3x the slowest
  honest one (at least 60 s, at most the task's timeout): past it, the exploit
  is inconclusive. A task whose build, reference solution or verifier fails
  reaching for hosts beyond the package registries this machine serves is
  reported NEEDS INTERNET (which hosts, where), not FAIL: it cannot be checked
  here. Several tasks end with one table of them all.
  --network none|public  instead of what task.toml says: none (the sandbox's
                    own loopback) or public (the internet through user-mode
                    networking, private ranges closed).
  --verify in-place|clean-room  where the tests run: in-place (default, as Harbor:
                    beside the processes the solution left, in its sandbox) or
                    clean-room (a fresh sandbox of the image holding only the
                    workspace: a service the solution left running is gone).
  --jobs N          sandboxes of a task run side by side (default 2).`;

function printReport(report: TaskCheckReport): void {
  process.stdout.write(`${report.passed ? 'PASS' : report.needsInternet ? 'NEEDS INTERNET' : 'FAIL'}  ${report.taskId}  (version ${report.version.slice(0, 12)})\n`);
  if (report.needsInternet) process.stdout.write(`  ${describeOutsideWorldNeed(report.needsInternet)}\n`);
  process.stdout.write(`  network: ${describeNetwork(report.network)}\n`);
  if (report.verifyMode === 'clean-room') process.stdout.write('  verify: clean-room (each case\'s tests in a fresh sandbox holding only its workspace)\n');
  if (report.offlineVerifier) process.stdout.write(`  verifier offline: ${report.offlineVerifier.note}\n`);
  if (report.environmentError) process.stdout.write(`  BAD  environment: ${report.environmentError.replace(/\n/g, '\n      | ')}\n`);
  for (const c of report.cases) {
    const got = c.reward === undefined ? 'no reward' : `reward ${c.reward}`;
    process.stdout.write(`  ${c.passed ? 'ok  ' : 'BAD '} ${c.name.padEnd(34)} expected ${c.expected}, ${got}${c.error ? `: ${c.error}` : ''}\n`);
    if (!c.passed && c.outputTail) process.stdout.write(`${c.outputTail.replace(/^/gm, '      | ')}\n`);
  }
  if ('error' in report.redTeam) {
    process.stdout.write(`  BAD  red team could not run: ${report.redTeam.error}\n`);
    return;
  }
  process.stdout.write(`  red team: ${report.exploitable ? `EXPLOITABLE by ${report.redTeam.exploits.filter((e) => e.exploitable).map((e) => e.name).join(', ')}` : 'no exploit scored above 0'}\n`);
  const width = Math.max(10, ...report.redTeam.exploits.map((e) => e.name.length));
  process.stdout.write(`  ${'exploit'.padEnd(width)}  verdict      reward  note (budget ${report.timings.exploitBudgetSeconds} s each)\n`);
  for (const e of report.redTeam.exploits) {
    const verdict = e.exploitable ? 'EXPLOITABLE' : e.notRun ? 'NOT RUN' : e.inconclusive ? 'inconclusive' : 'resists';
    process.stdout.write(`  ${e.name.padEnd(width)}  ${verdict.padEnd(11)}  ${(e.reward === undefined ? '-' : String(e.reward)).padStart(6)}  ${e.note ?? e.description}\n`);
  }
  for (const why of report.redTeam.notTried ?? []) process.stdout.write(`  ${why}\n`);
}

export async function taskCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'check' && wantsHelp(argv)) throw new HelpRequested(taskUsage);
  if (sub !== 'check') throw new UsageError(`unknown task subcommand ${JSON.stringify(sub ?? '')}; usage:\n${taskUsage}`);
  const { values, positionals } = parseCommandLine(rest, {
    command: 'task check',
    usage: taskUsage,
    options: { json: { type: 'boolean', default: false }, network: { type: 'string' }, verify: { type: 'string' }, jobs: { type: 'string', default: '2' } },
    allowPositionals: true,
  });
  const jobs = Number(values.jobs);
  if (!Number.isInteger(jobs) || jobs < 1) throw new UsageError(`--jobs ${JSON.stringify(values.jobs)}: give a whole number of sandboxes, at least 1`);
  const verifyMode = parseVerifyMode(values.verify);
  if (positionals.length === 0) throw new UsageError(`name at least one task directory; usage:\n${taskUsage}`);
  let network: NetworkMode | undefined;
  try {
    network = values.network === undefined ? undefined : parseNetworkMode(values.network, '--network');
  } catch (err) {
    throw new UsageError((err as Error).message);
  }

  const tasks = positionals.map((dir) => {
    try {
      const task = loadTask(dir);
      return withNetwork(task, network, `rollout task check --network ${network ?? ''}`);
    } catch (err) {
      if (err instanceof ClassifiedError && err.failureClass === 'task') throw new UsageError(err.message);
      throw err;
    }
  });
  const provider = new LocalSandboxProvider();
  const reports: TaskCheckReport[] = [];
  for (const task of tasks) {
    for (const warning of task.warnings) process.stderr.write(`warning: ${task.id}: ${warning}\n`);
    let report: TaskCheckReport;
    try {
      report = await checkTask(task, provider, { jobs, ...(verifyMode ? { verifyMode } : {}) });
    } catch (err) {
      if (err instanceof ClassifiedError && err.failureClass === 'task') throw new UsageError(err.message);
      throw err;
    }
    reports.push(report);
    if (!values.json) printReport(report);
  }
  if (values.json) process.stdout.write(`${JSON.stringify(reports, null, 2)}\n`);
  const failed = reports.filter((r) => !r.passed).length;
  if (!values.json) {
    const exploitable = reports.filter((r) => r.exploitable).map((r) => r.taskId);
    if (reports.length > 1) process.stdout.write(collectionTable(reports));
    const outside = reports.filter((r) => r.needsInternet).map((r) => r.taskId);
    const outsideNote = outside.length > 0 ? `; ${outside.length} need the internet beyond the package registries (${outside.join(', ')}): not failures of theirs, not checkable here` : '';
    process.stdout.write(`${reports.length - failed} of ${reports.length} tasks pass their check${exploitable.length > 0 ? `; exploitable: ${exploitable.join(', ')}` : ''}${outsideNote}\n`);
  }
  return failed === 0 ? 0 : 1;
}
