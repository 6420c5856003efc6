/**
 * `npm test`: starts a real Temporal dev server (unless TEMPORAL_ADDRESS names one to reuse), runs
 * every test file against it, side by side as the machine holds them (test/runner/), and stops the
 * server. Each file is its own `node --test` process; its output is printed whole when it ends, and
 * a table of every file's wall and CPU time closes the run. Arguments: test file paths run just those;
 * flags (for example `--test-name-pattern`) go to every file's `node --test`.
 *
 * Settings: ROLLOUT_TEST_JOBS (most files at once, default 2 × cores), ROLLOUT_TEST_CPU_BUDGET (the
 * cores the running files' weights may add up to, default 1.5 × cores: most files wait more than they compute,
 * ROLLOUT_TEST_NICE (the nice of files beside a CPU-heavy suite, default 0).
 */
import { globSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDevServer, type RunningDevServer } from '../servers/temporalDevServer.js';
import { TemporalBinaryError } from '../servers/temporalBinary.js';
import { runTestFile, stopAllTestFiles, type FileResult } from './runner/fileRun.js';
import { CPU_HEAVY, TRAINER, scheduledFile, type PlannedFile } from './runner/schedule.js';
import { longestFirst, pickStartable } from './runner/scheduler.js';
import { formatTimeTable } from './runner/timeTable.js';
import { readTimings, timingsFile, writeTimings, type TimingTable } from './runner/timings.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outputDir = join(root, 'test-output');
mkdirSync(outputDir, { recursive: true });

const userArgs = process.argv.slice(2);
const fileArgs = userArgs.filter((a) => !a.startsWith('-') && a.endsWith('.ts'));
const nodeTestArgs = userArgs.filter((a) => !fileArgs.includes(a));
const files = (fileArgs.length > 0 ? fileArgs.map((f) => relative(root, resolve(f))) : globSync('test/**/*.test.ts', { cwd: root }))
  .filter((f) => !f.startsWith('test/fixtures/'))
  .sort();
if (files.length === 0) {
  console.error('npm test: no test files matched; give paths such as test/unit/lint.test.ts');
  process.exit(2);
}

let server: RunningDevServer | undefined;
const env = { ...process.env };
if (!env.TEMPORAL_ADDRESS) {
  try {
    server = await startDevServer({ logFile: join(outputDir, 'temporal-dev-server.log') });
  } catch (err) {
    if (err instanceof TemporalBinaryError) {
      console.error(`npm test: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  env.TEMPORAL_ADDRESS = server.address;
  env.TEMPORAL_CLI_PATH = server.binary.path;
  if (server.uiUrl) env.TEMPORAL_UI_URL = server.uiUrl;
  console.log(`npm test: Temporal dev server ${server.binary.version} at ${server.address} (UI ${server.uiUrl ?? 'off'}), pid ${server.pid}`);
} else {
  console.log(`npm test: reusing the Temporal server at ${env.TEMPORAL_ADDRESS}`);
}

const cores = availableParallelism();
const limits = {
  maxFiles: Number(env.ROLLOUT_TEST_JOBS ?? cores * 2),
  weightBudget: Number(env.ROLLOUT_TEST_CPU_BUDGET ?? cores * 1.5),
};
const timingsPath = timingsFile(env);
const lastRun = readTimings(timingsPath);
const plan = longestFirst(files.map((f) => scheduledFile(f, lastRun[f])));
console.log(
  `npm test: ${plan.length} files, up to ${limits.maxFiles} at once within ${limits.weightBudget} cores of weight ` +
    `(${Object.keys(lastRun).length > 0 ? `order and weights from ${timingsPath}` : 'no earlier run here: declared estimates'})`,
);

// One folder per test file, emptied when that file starts (another run's files are left alone).
const filesDir = join(outputDir, 'files');
const runStarted = Date.now();
const results: FileResult[] = [];
const waiting = [...plan];
const running = new Map<string, PlannedFile>();
let interrupted = false;

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    interrupted = true;
    waiting.length = 0;
    stopAllTestFiles(`npm test got ${signal}`);
  });
}

function elapsed(): string {
  return `${((Date.now() - runStarted) / 1000).toFixed(0)}s`;
}

await new Promise<void>((allDone) => {
  const startMore = (): void => {
    for (const f of pickStartable(waiting, [...running.values()], limits)) {
      waiting.splice(waiting.indexOf(f), 1);
      running.set(f.file, f);
      const outDir = join(filesDir, f.file.replace(/[/\\]/g, '__'));
      rmSync(outDir, { recursive: true, force: true });
      mkdirSync(outDir, { recursive: true });
      console.log(`[${elapsed()}] start ${f.file} (beside ${running.size - 1}; expected ${f.expectedS.toFixed(0)} s, weight ${f.weight.toFixed(2)})`);
      // ROLLOUT_TEST_NICE lowers the priority of the files beside a CPU-heavy suite (the run's critical
      // path). Off by default: at nice 10 beside the real model, the cluster suite's 15 s probe of the
      // Temporal CLI timed out (run 5 of 2026-12-06).
      const niceness = f.locks.includes(CPU_HEAVY) || f.locks.includes(TRAINER) ? 0 : Number(env.ROLLOUT_TEST_NICE ?? 0);
      void runTestFile({ root, file: f.file, outDir, env, nodeTestArgs, limitS: f.limitS, niceness }).then((r) => {
        running.delete(f.file);
        results.push(r);
        let log = '';
        try {
          log = readFileSync(r.logFile, 'utf8');
        } catch {
          log = '(no output kept)\n';
        }
        const verdict = r.killedBecause ? `KILLED (${r.killedBecause})` : r.exitCode === 0 ? 'ok' : `FAILED (exit ${r.exitCode})`;
        console.log(`\n===== ${f.file}: ${verdict}, ${r.wallS.toFixed(1)} s wall, ${r.cpuS.toFixed(1)} s cpu, ${r.counts.pass} passed, ${r.counts.fail} failed, ${r.counts.skipped} skipped [${elapsed()}]`);
        process.stdout.write(log.endsWith('\n') || log === '' ? log : `${log}\n`);
        console.log(`===== end of ${f.file}\n`);
        if (waiting.length === 0 && running.size === 0) allDone();
        else startMore();
      });
    }
    if (waiting.length === 0 && running.size === 0) allDone();
  };
  startMore();
});

const elapsedS = (Date.now() - runStarted) / 1000;
const table = formatTimeTable(results, elapsedS);
writeFileSync(join(outputDir, 'test-times.txt'), `${table}\n`);
console.log(`\nnpm test: every test file's time (test-output/test-times.txt; ${results.length} files in ${elapsedS.toFixed(0)} s)\n${table}\n`);

// Record the whole files' times for the next run's order and weights (not a filtered or interrupted
// run; not a file that failed or was stopped: its time says when it broke, not what it needs).
if (!interrupted && !nodeTestArgs.some((a) => a.startsWith('--test-name-pattern') || a.startsWith('--test-skip-pattern'))) {
  const measured: TimingTable = {};
  for (const r of results) if (!r.killedBecause && r.exitCode === 0) measured[r.file] = { wallS: r.wallS, cpuS: r.cpuS, at: new Date().toISOString() };
  writeTimings(timingsPath, measured);
}

const failedFiles = results.filter((r) => r.exitCode !== 0 || r.killedBecause);
const sum = (k: 'pass' | 'fail' | 'skipped' | 'todo' | 'cancelled'): number => results.reduce((s, r) => s + r.counts[k], 0);
// A file that failed outside any test (a crash at load, a kill) fails the run even with 0 failed tests.
const failed = sum('fail') + sum('cancelled') + failedFiles.filter((r) => r.counts.fail + r.counts.cancelled === 0).length;
if (failedFiles.length > 0) console.log(`npm test: failed files: ${failedFiles.map((r) => r.file).join(', ')}`);
console.log(`tests: ${sum('pass')} passed, ${failed} failed, ${sum('skipped') + sum('todo')} skipped`);

await server?.stop();
process.exit(failedFiles.length > 0 || interrupted ? 1 : 0);
