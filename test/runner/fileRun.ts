/**
 * Runs one test file as its own `node --test` process and measures it: wall time, CPU time of its
 * process tree (user+sys of the process and every descendant it reaped, from bash's `times`), and the
 * counts node's test runner reports (read from a TAP copy of its output). The spec output goes to a
 * log file per test file, so files that run side by side do not interleave; the caller prints it whole.
 */
import { spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface FileCounts {
  tests: number;
  pass: number;
  fail: number;
  skipped: number;
  todo: number;
  cancelled: number;
}

export interface FileResult {
  file: string;
  /** Wall seconds from spawn to exit. */
  wallS: number;
  /** user+sys seconds of the file's process tree. */
  cpuS: number;
  exitCode: number;
  /** Why the runner stopped it, when it did (its time limit, an interrupt). */
  killedBecause?: string;
  counts: FileCounts;
  logFile: string;
}

export interface FileRunOptions {
  root: string;
  file: string;
  /** Where this file's spec log, TAP copy and times go (a folder of its own). */
  outDir: string;
  env: NodeJS.ProcessEnv;
  /** Extra flags for `node --test` (for example --test-name-pattern). */
  nodeTestArgs: string[];
  /** The runner stops the file's whole process group past this many seconds. */
  limitS: number;
  /** `nice` of the file's processes: the files beside a CPU-heavy one yield the cores to it. */
  niceness: number;
}

/** Reads node's TAP summary lines (`# pass 3`, ...). */
export function parseTapCounts(tap: string): FileCounts {
  const read = (key: string): number => {
    const m = new RegExp(`^# ${key} (\\d+)$`, 'm').exec(tap);
    return m ? Number(m[1]) : 0;
  };
  return { tests: read('tests'), pass: read('pass'), fail: read('fail'), skipped: read('skipped'), todo: read('todo'), cancelled: read('cancelled') };
}

/** Reads the children's line of bash's `times` ("0m1.500s 0m0.250s"): user+sys seconds. */
export function parseBashTimes(text: string): number {
  const lines = text.trim().split('\n');
  const children = lines[1] ?? '';
  let total = 0;
  for (const m of children.matchAll(/(\d+)m([\d.]+)s/g)) total += Number(m[1]) * 60 + Number(m[2]);
  return total;
}

/** Runs the file; a failure of the runner's own (its output folder gone) is that file's failure, never the run's end. */
export async function runTestFile(o: FileRunOptions): Promise<FileResult> {
  try {
    return await runMeasured(o);
  } catch (err) {
    const empty = { tests: 0, pass: 0, fail: 0, skipped: 0, todo: 0, cancelled: 0 };
    return { file: o.file, wallS: 0, cpuS: 0, exitCode: 1, killedBecause: `the runner could not run it: ${err instanceof Error ? err.message : String(err)}`, counts: empty, logFile: join(o.outDir, 'output.log') };
  }
}

function runMeasured(o: FileRunOptions): Promise<FileResult> {
  mkdirSync(o.outDir, { recursive: true });
  const logFile = join(o.outDir, 'output.log');
  const tapFile = join(o.outDir, 'report.tap');
  const timesFile = join(o.outDir, 'times.txt');
  writeFileSync(tapFile, '');
  writeFileSync(timesFile, '');
  const nodeArgs = [
    '--import', 'tsx', '--test',
    '--test-reporter=spec', '--test-reporter-destination=stdout',
    '--test-reporter=tap', `--test-reporter-destination=${tapFile}`,
    ...o.nodeTestArgs, o.file,
  ];
  // bash reaps node, and node reaps what it started: `times` then holds the whole tree's CPU.
  const script = '"$@"; rc=$?; times > "$ROLLOUT_TEST_TIMES_FILE"; exit $rc';
  const started = process.hrtime.bigint();
  return new Promise((resolve) => {
    // Written as it comes (tail it to watch a long file), printed whole by the runner at the end.
    const log = createWriteStream(logFile);
    const child = spawn('nice', ['-n', String(o.niceness), 'bash', '-c', script, 'bash', process.execPath, ...nodeArgs], {
      cwd: o.root,
      env: { ...o.env, ROLLOUT_TEST_TIMES_FILE: timesFile },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    let killedBecause: string | undefined;
    const stopGroup = (why: string): void => {
      killedBecause ??= why;
      try {
        if (child.pid) process.kill(-child.pid, 'SIGTERM');
      } catch { /* already gone */ }
      setTimeout(() => {
        try {
          if (child.pid) process.kill(-child.pid, 'SIGKILL');
        } catch { /* already gone */ }
      }, 10_000).unref();
    };
    const limit = setTimeout(() => stopGroup(`ran past its limit of ${o.limitS} s (test/runner/schedule.ts)`), o.limitS * 1000);
    limit.unref();
    runningGroups.set(child, stopGroup);
    child.on('close', (code, signal) => {
      clearTimeout(limit);
      runningGroups.delete(child);
      const wallS = Number(process.hrtime.bigint() - started) / 1e9;
      const read = (f: string): string => {
        try {
          return readFileSync(f, 'utf8');
        } catch {
          return '';
        }
      };
      log.end(() => resolve({
        file: o.file,
        wallS,
        cpuS: parseBashTimes(read(timesFile)),
        exitCode: code ?? (signal ? 1 : 0),
        ...(killedBecause ? { killedBecause } : {}),
        counts: parseTapCounts(read(tapFile)),
        logFile,
      }));
    });
  });
}

const runningGroups = new Map<object, (why: string) => void>();

/** Stops every test file still running (the runner got SIGINT/SIGTERM). */
export function stopAllTestFiles(why: string): void {
  for (const stop of runningGroups.values()) stop(why);
}
