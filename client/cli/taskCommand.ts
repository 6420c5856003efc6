/**
 * `rollout task check <dir>...`: runs each task's verifier on the untouched
 * start, every known-bad solution and the reference solution, in real local
 * sandboxes. Exit 0 when every task behaves, 1 when one does not, 2 when a
 * task directory is invalid.
 */
import { parseArgs } from 'node:util';
import { LocalSandboxProvider } from '../../activities/sandbox/local/localSandboxProvider.js';
import { checkTask, type TaskCheckReport } from '../../activities/tasks/checkTask.js';
import { loadTask } from '../../activities/tasks/loadTask.js';
import { ClassifiedError } from '../../shared/failures.js';
import { UsageError } from './usageError.js';

export const taskUsage = `rollout task check <task-dir>... [--json]
  Runs the verifier on the untouched start (must score 0), every known-bad/*.sh
  (must score 0) and solution/solve.sh (must score 1), each in a fresh sandbox.`;

function printReport(report: TaskCheckReport): void {
  process.stdout.write(`${report.passed ? 'PASS' : 'FAIL'}  ${report.taskId}  (version ${report.version.slice(0, 12)})\n`);
  for (const c of report.cases) {
    const got = c.reward === undefined ? 'no reward' : `reward ${c.reward}`;
    process.stdout.write(`  ${c.passed ? 'ok  ' : 'BAD '} ${c.name.padEnd(34)} expected ${c.expected}, ${got}${c.error ? `: ${c.error}` : ''}\n`);
    if (!c.passed && c.outputTail) process.stdout.write(`${c.outputTail.replace(/^/gm, '      | ')}\n`);
  }
}

export async function taskCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'check') throw new UsageError(`unknown task subcommand ${JSON.stringify(sub ?? '')}; usage:\n${taskUsage}`);
  const { values, positionals } = parseArgs({ args: rest, options: { json: { type: 'boolean', default: false } }, allowPositionals: true, strict: true });
  if (positionals.length === 0) throw new UsageError(`name at least one task directory; usage:\n${taskUsage}`);

  const tasks = positionals.map((dir) => {
    try {
      return loadTask(dir);
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
      report = await checkTask(task, provider);
    } catch (err) {
      if (err instanceof ClassifiedError && err.failureClass === 'task') throw new UsageError(err.message);
      throw err;
    }
    reports.push(report);
    if (!values.json) printReport(report);
  }
  if (values.json) process.stdout.write(`${JSON.stringify(reports, null, 2)}\n`);
  const failed = reports.filter((r) => !r.passed).length;
  if (!values.json) process.stdout.write(`${reports.length - failed} of ${reports.length} tasks pass their check\n`);
  return failed === 0 ? 0 : 1;
}
