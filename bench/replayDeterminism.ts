/**
 * `npx tsx bench/replayDeterminism.ts [--json-file F] TASK_DIR...` (bash scripts/with-env.sh --for test):
 * how well resume by replay (resume/) can restore each task. Runs the task's oracle actions
 * (its solution files written to /solution, then `bash /solution/solve.sh`, as the scripted oracle
 * policy does) in two fresh sandboxes of the task, call by call, and compares each call: exit code,
 * the observation the model would see, and the digest of the sandbox's files after it. For what
 * differs, it says what: only digits in the output (times, durations, pids, sizes), other text, or
 * which areas of the file system. Tasks whose image cannot be built here are listed as such.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { executeToolCall } from '../agent/executeTool.js';
import { taskEnvironment } from '../images/taskEnvironment.js';
import { listFiles } from '../shared/hashTree.js';
import { loadTask } from '../tasks/loadTask.js';
import { sandboxSpecForTask } from '../images/sandboxSpecForTask.js';
import { differingAreas } from '../resume/replayTurns.js';
import { LocalSandboxProvider } from '../sandboxes/local/localSandboxProvider.js';
import type { SandboxStateDigest } from '../shared/sandbox.js';
import type { ToolCall } from '../shared/tools.js';

interface CallOutcome {
  exitCode: number | null;
  observation: string;
  state: SandboxStateDigest;
  /** How long the call took, and the digest after it (what resume by replay adds to every call). */
  callMs: number;
  digestMs: number;
}

export interface TaskReplay {
  task: string;
  calls: number;
  /** Calls whose exit code, observation and state were the same both times. */
  identical: number;
  sameExit: number;
  sameObservation: number;
  sameState: number;
  /** The first difference of each kind, said for a person. */
  differences: string[];
  /** Why the task could not be measured (its image does not build here, ...). */
  skipped?: string;
  /** The digest after each call of the first run, and the calls themselves, in milliseconds. */
  digestMs?: number[];
  callMs?: number[];
  /** Entries the last digest walked (files, directories, links of the agent's layer). */
  digestEntries?: number;
  ms: number;
}

function oracleCalls(taskDir: string): ToolCall[] {
  const dir = join(taskDir, 'solution');
  const files = listFiles(dir).map((f) => ({ path: `/solution/${relative(dir, f)}`, content: readFileSync(f, 'utf8') }));
  const call = (i: number, name: string, args: Record<string, unknown>): ToolCall => ({ id: `call_${i}`, type: 'function', function: { name, arguments: JSON.stringify(args) } });
  return [...files.map((f, i) => call(i, 'write_file', f)), call(files.length, 'bash', { command: 'bash /solution/solve.sh' })];
}

/** Whether two outputs differ only in their digits (a time, a duration, a pid, a size). */
function digitsOnly(a: string, b: string): boolean {
  return a.replace(/\d+/g, '#') === b.replace(/\d+/g, '#');
}

async function runOnce(provider: LocalSandboxProvider, taskDir: string, run: number): Promise<CallOutcome[]> {
  const task = loadTask(taskDir);
  const environment = await taskEnvironment(task, provider.name);
  const spec = sandboxSpecForTask(task, { workflowId: `replay-determinism/${task.id}/${run}`, runId: '', attempt: 0 }, { purpose: 'replay-determinism' }, false, environment.image);
  const { handle } = await provider.provision(spec);
  try {
    const out: CallOutcome[] = [];
    for (const call of oracleCalls(taskDir)) {
      const callStarted = performance.now();
      const r = await executeToolCall(provider, handle, call, { workdir: handle.workdir, commandTimeoutSec: 1800, maxOutputBytes: 64 * 1024, remainingMs: 1800_000 });
      const digestStarted = performance.now();
      const state = await provider.stateDigest(handle);
      out.push({ exitCode: r.exitCode, observation: r.observation, state, callMs: digestStarted - callStarted, digestMs: performance.now() - digestStarted });
    }
    return out;
  } finally {
    await provider.teardown(handle);
  }
}

export async function replayDeterminism(provider: LocalSandboxProvider, taskDir: string): Promise<TaskReplay> {
  const started = performance.now();
  let task = taskDir;
  let first: CallOutcome[];
  let second: CallOutcome[];
  try {
    task = loadTask(taskDir).id;
    first = await runOnce(provider, taskDir, 0);
    second = await runOnce(provider, taskDir, 1);
  } catch (err) {
    return {
      task,
      calls: 0,
      identical: 0,
      sameExit: 0,
      sameObservation: 0,
      sameState: 0,
      differences: [],
      skipped: (err instanceof Error ? err.message : String(err)).split('\n')[0]?.slice(0, 200) ?? '',
      ms: performance.now() - started,
    };
  }
  const differences: string[] = [];
  let identical = 0;
  let sameExit = 0;
  let sameObservation = 0;
  let sameState = 0;
  first.forEach((a, i) => {
    const b = second[i] as CallOutcome;
    const exit = a.exitCode === b.exitCode;
    const observation = a.observation === b.observation;
    const state = a.state.digest === b.state.digest;
    sameExit += exit ? 1 : 0;
    sameObservation += observation ? 1 : 0;
    sameState += state ? 1 : 0;
    identical += exit && observation && state ? 1 : 0;
    if (!exit) differences.push(`call ${i}: exit code ${a.exitCode} then ${b.exitCode}`);
    if (!observation) differences.push(`call ${i}: output differs ${digitsOnly(a.observation, b.observation) ? 'in digits only (times, durations, pids, sizes): drift' : 'in text'}`);
    if (!state) differences.push(`call ${i}: files differ in ${differingAreas(a.state, b.state)}`);
    else if (a.state.volatile?.digest !== b.state.volatile?.digest) differences.push(`call ${i}: caches, logs or bytecode differ (drift)`);
  });
  const last = first.at(-1)?.state;
  return {
    task,
    calls: first.length,
    identical,
    sameExit,
    sameObservation,
    sameState,
    differences,
    digestMs: first.map((c) => c.digestMs),
    callMs: first.map((c) => c.callMs),
    ...(last ? { digestEntries: last.files + (last.volatile?.files ?? 0) } : {}),
    ms: performance.now() - started,
  };
}

export function formatReplayDeterminism(rows: TaskReplay[]): string {
  const lines = [
    '| task | oracle calls | identical | same exit | same output | same files | digest ms max (entries) | digest / call time | what differed |',
    '|:--|--:|--:|--:|--:|--:|--:|--:|:--|',
  ];
  for (const r of rows) {
    if (r.skipped) lines.push(`| ${r.task} | - | - | - | - | - | - | - | not measured: ${r.skipped.replace(/\|/g, '/')} |`);
    else {
      const digest = (r.digestMs ?? []).reduce((a, b) => a + b, 0);
      const calls = (r.callMs ?? []).reduce((a, b) => a + b, 0);
      const max = Math.max(0, ...(r.digestMs ?? []));
      const share = calls > 0 ? `${((100 * digest) / calls).toFixed(1)} %` : '-';
      lines.push(
        `| ${r.task} | ${r.calls} | ${r.identical} | ${r.sameExit} | ${r.sameObservation} | ${r.sameState} | ${max.toFixed(0)} (${r.digestEntries ?? '?'}) | ${share} | ${r.differences.join('; ').replace(/\|/g, '/') || '-'} |`,
      );
    }
  }
  const measured = rows.filter((r) => !r.skipped);
  const restorable = measured.filter((r) => r.sameExit === r.calls && r.sameState === r.calls).length;
  lines.push(
    '',
    `${measured.length} tasks measured: ${measured.filter((r) => r.identical === r.calls).length} replay to identical outputs and files; ${restorable} restorable by replay (same exit codes and files, outputs may drift); ${rows.length - measured.length} not measured`,
  );
  return lines.join('\n');
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({ options: { 'json-file': { type: 'string' } }, allowPositionals: true });
  if (positionals.length === 0) throw new Error('usage: npx tsx bench/replayDeterminism.ts [--json-file F] TASK_DIR...');
  const provider = new LocalSandboxProvider();
  const rows: TaskReplay[] = [];
  for (const dir of positionals) {
    const row = await replayDeterminism(provider, dir);
    process.stderr.write(`${row.task}: ${row.skipped ? `not measured (${row.skipped})` : `${row.identical}/${row.calls} identical`} in ${(row.ms / 1000).toFixed(1)} s\n`);
    rows.push(row);
  }
  process.stdout.write(`${formatReplayDeterminism(rows)}\n`);
  if (values['json-file']) writeFileSync(values['json-file'], JSON.stringify(rows, null, 2));
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
