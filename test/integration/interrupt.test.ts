/**
 * Stopping `rollout run` with Ctrl-C, as a user does it: the real command in
 * its own process group (a terminal's Ctrl-C reaches the whole group), a
 * slow policy (the scripted OpenAI endpoint's rollouts sit in a long tool
 * call), and the host checked afterwards for any trace of a sandbox.
 *   embedded, one Ctrl-C: the groups are cancelled, every sandbox is torn
 *     down, workers and dev server stop, the lines say what was cancelled and
 *     how to run it again;
 *   embedded, two Ctrl-Cs: it exits at once, and the next start cancels the
 *     interrupted groups and reaps what they left;
 *   against running workers: Ctrl-C detaches and the batch finishes anyway.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import type { GroupResult } from '../../shared/pipeline.js';
import { countLeaks, FaultHost, leaksUnder } from '../faults/faultKit.js';
import { eventually } from '../helpers/eventually.js';
import { startScriptedOpenAIServer, type Script } from '../helpers/scriptedOpenAIServer.js';
import { connectClient, testServerAddress } from '../helpers/temporal.js';
import { processesMentioning } from '../helpers/localSandboxInspector.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const tasks = ['write-greeting', 'count-log-errors'].map((t) => join(root, 'examples/tasks', t));
const scratch = mkdtempSync(join(tmpdir(), 'interrupt-'));
const WRITE_GREETING = "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt";

after(() => rmSync(scratch, { recursive: true, force: true }));

/** Turn 0 sits in a `sleep` tool call; turn 1 submits. */
function slow(sleepSec: number): Script {
  return (_req, turn) => (turn === 0 ? { content: 'Working.', toolCalls: [{ name: 'bash', arguments: { command: `sleep ${sleepSec}; ${WRITE_GREETING}` } }] } : { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] });
}

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function rollout(args: string[], env: Record<string, string>): Run {
  // detached: its own process group, so `process.kill(-pid)` is what a terminal's Ctrl-C does.
  const child = spawn(process.execPath, [join(root, 'client/bin/rollout.js'), ...args], { cwd: scratch, env: { ...process.env, LOG_LEVEL: 'warn', ...env }, detached: true });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  // Each stderr line with the time it arrived (ms since the epoch), for the timings the test reports.
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString().replace(/^(?=.)/gm, () => `[${Date.now()}] `)));
  const exited = new Promise<number | null>((r) => child.on('close', (code, signal) => r(code ?? (signal ? 128 : null))));
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

function ctrlC(run: Run): void {
  if (run.child.pid) process.kill(-run.child.pid, 'SIGINT');
}

async function sandboxesInToolCall(sandboxRoot: string, n: number, llm: { requests: unknown[] }): Promise<void> {
  const provider = new LocalSandboxProvider({ stateRoot: sandboxRoot });
  await eventually(async () => ({ alive: (await provider.list()).filter((s) => s.alive).length, requests: llm.requests.length }), (v) => v.alive === n && v.requests >= n, `${n} sandboxes up and in their tool call`, 180_000);
  await new Promise((r) => setTimeout(r, 1_500));
}

function noTrace(sandboxRoot: string, what: string): Promise<unknown> {
  return eventually(async () => leaksUnder(sandboxRoot, []), (l) => countLeaks(l) === 0, `${what}: no sandbox directory, bwrap process, mount or tmpfs under ${sandboxRoot}`, 20_000);
}

function cgroupsOf(ids: string[]): string[] {
  return ids.flatMap((id) => ['/sys/fs/cgroup/rollout-pipeline', '/sys/fs/cgroup/memory/rollout-pipeline', '/sys/fs/cgroup/pids/rollout-pipeline'].map((d) => join(d, id))).filter((d) => existsSync(d));
}

describe('Ctrl-C on rollout run', { timeout: 600_000 }, () => {
  test('embedded: one Ctrl-C cancels the running groups, tears every sandbox down, stops workers and server, says how to run it again', async (t) => {
    const llm = await startScriptedOpenAIServer(slow(300));
    const data = join(scratch, 'once', 'data');
    const sandboxRoot = join(scratch, 'once', 'sandboxes');
    try {
      const run = rollout(['run', '--embedded', '--tasks', tasks[0] as string, '--tasks', tasks[1] as string, '--group-size', '2', '--batch-id', 'int-once', '--policy', 'openai', '--base-url', llm.baseUrl, '--model', 'm', '--data-dir', data], { ROLLOUT_SANDBOX_ROOT: sandboxRoot });
      await sandboxesInToolCall(sandboxRoot, 4, llm);
      const ids = new LocalSandboxProvider({ stateRoot: sandboxRoot }).registry.ids();
      const interruptedAt = Date.now();
      ctrlC(run);
      const code = await run.exited;
      t.diagnostic(`Ctrl-C to exit: ${Date.now() - interruptedAt} ms (4 rollouts in a tool call); stderr, ms after the Ctrl-C:\n${run.stderr().replace(/\[(\d+)\]/g, (_, ms: string) => `[+${Number(ms) - interruptedAt}]`)}`);
      assert.equal(code, 130, run.stderr());
      const err = run.stderr();
      assert.match(err, /interrupted \(SIGINT\): cancelling 2 unfinished groups of batch int-once/);
      assert.match(err, /cancelled 2 groups of batch int-once: count-log-errors, write-greeting/);
      assert.match(err, /every cancelled rollout tore its sandbox down\./);
      assert.match(err, /run them again: rollout run .*--embedded.*--tasks \S*count-log-errors --tasks \S*write-greeting --batch-id int-once-2/);
      assert.match(err, /stopped the workers and the embedded dev server\./);
      assert.doesNotMatch(err, /at .*\.ts:\d+/, 'no stack trace');
      await noTrace(sandboxRoot, 'after one Ctrl-C');
      assert.deepEqual(cgroupsOf(ids), [], 'no cgroup left');
      assert.deepEqual(processesMentioning(data), [], 'no dev server or worker process of this run left');
      assert.equal(existsSync(join(data, 'embedded-run.json')), false, 'a clean stop leaves no marker');
    } finally {
      await llm.close();
    }
  });

  test('embedded: SIGTERM while the model is still answering stops within seconds and leaves no sandbox', async (t) => {
    // The model never answers the first turn: each rollout waits in a policy call that does not stop when cancelled.
    const llm = await startScriptedOpenAIServer(slow(1));
    llm.misbehaveNext('hang');
    llm.misbehaveNext('hang');
    const data = join(scratch, 'sigterm', 'data');
    const sandboxRoot = join(scratch, 'sigterm', 'sandboxes');
    try {
      const run = rollout(['run', '--embedded', '--tasks', tasks[0] as string, '--group-size', '2', '--batch-id', 'int-term', '--policy', 'openai', '--base-url', llm.baseUrl, '--model', 'm', '--data-dir', data], { ROLLOUT_SANDBOX_ROOT: sandboxRoot });
      await sandboxesInToolCall(sandboxRoot, 2, llm);
      const at = Date.now();
      run.child.kill('SIGTERM');
      const code = await run.exited;
      t.diagnostic(`SIGTERM to exit: ${Date.now() - at} ms (2 rollouts waiting on the model)`);
      assert.equal(code, 143, run.stderr());
      assert.match(run.stderr(), /interrupted \(SIGTERM\): cancelling 1 unfinished groups of batch int-term/);
      assert.match(run.stderr(), /every cancelled rollout tore its sandbox down\./);
      await noTrace(sandboxRoot, 'after SIGTERM');
      assert.deepEqual(processesMentioning(data), [], 'no dev server or worker process of this run left');
    } finally {
      await llm.close();
    }
  });

  test('embedded: a second Ctrl-C exits at once; the next start cancels the interrupted groups and reaps their sandboxes', async (t) => {
    const llm = await startScriptedOpenAIServer(slow(300));
    const data = join(scratch, 'twice', 'data');
    const sandboxRoot = join(scratch, 'twice', 'sandboxes');
    const env = { ROLLOUT_SANDBOX_ROOT: sandboxRoot };
    try {
      const run = rollout(['run', '--embedded', '--tasks', tasks[0] as string, '--group-size', '2', '--batch-id', 'int-twice', '--policy', 'openai', '--base-url', llm.baseUrl, '--model', 'm', '--data-dir', data], env);
      await sandboxesInToolCall(sandboxRoot, 2, llm);
      ctrlC(run);
      await eventually(async () => run.stderr(), (e) => /cancelling 1 unfinished groups/.test(e), 'the first Ctrl-C acknowledged');
      const secondAt = Date.now();
      ctrlC(run);
      const code = await run.exited;
      t.diagnostic(`second Ctrl-C to exit: ${Date.now() - secondAt} ms`);
      assert.equal(code, 130, run.stderr());
      assert.match(run.stderr(), /SIGINT again: exiting now; the next start reaps what is left/);
      assert.equal(existsSync(join(data, 'embedded-run.json')), true, 'the cut-short run left its marker');
      // The same data directory, another batch: the leftover groups are cancelled and their sandboxes go.
      llm.setDelayMs(0);
      const next = rollout(['run', '--embedded', '--tasks', tasks[1] as string, '--group-size', '1', '--batch-id', 'int-next', '--policy', 'scripted:oracle', '--min-valid', '1', '--data-dir', data], env);
      const nextCode = await next.exited;
      t.diagnostic(`next start's stderr:\n${next.stderr()}`);
      assert.equal(nextCode, 0, next.stderr());
      // The first Ctrl-C's cancel may already have closed everything before the second one (then nothing is
      // left and nothing is said); whatever was left open is cancelled and torn down, never left to the janitor.
      if (/batch int-twice was interrupted/.test(next.stderr())) {
        assert.match(next.stderr(), /batch int-twice was interrupted .*: cancelled what it left open \([01] groups?, [012] rollouts?\); their sandboxes were torn down/);
      }
      await noTrace(sandboxRoot, 'after the next start');
      assert.deepEqual(processesMentioning(data), [], 'no process of either run left');
    } finally {
      await llm.close();
    }
  });

  test('against running workers: Ctrl-C detaches, says how to watch or cancel, and the batch finishes in the cluster', async () => {
    const { client, close } = await connectClient();
    const host = new FaultHost(scratch, 'detach');
    const llm = await startScriptedOpenAIServer(slow(8));
    try {
      await host.startWorker();
      const run = rollout(['run', '--address', testServerAddress(), '--queue-prefix', host.prefix, '--tasks', tasks[0] as string, '--group-size', '2', '--batch-id', `int-detach-${Date.now()}`, '--policy', 'openai', '--base-url', llm.baseUrl, '--model', 'm', '--data-dir', host.dataDir], {});
      await sandboxesInToolCall(host.sandboxRoot, 2, llm);
      ctrlC(run);
      const code = await run.exited;
      assert.equal(code, 130, run.stderr());
      const batchId = /detached from batch (\S+);/.exec(run.stderr())?.[1];
      assert.ok(batchId, run.stderr());
      assert.match(run.stderr(), /its 1 unfinished groups go on at /);
      assert.match(run.stderr(), new RegExp(`watch it: +rollout status ${batchId} --address `));
      assert.match(run.stderr(), new RegExp(`cancel it: +rollout cancel --batch ${batchId} --address `));
      const result = (await client.workflow.getHandle(`rollout/${batchId}/write-greeting`).result()) as GroupResult;
      assert.deepEqual(result.rollouts.map((r) => r.reward), [1, 1], 'the batch went on without the client');
      const lines = readFileSync(join(host.dataDir, 'results', `${batchId}.jsonl`), 'utf8');
      assert.equal(lines.trim(), '', 'nothing had finished when it detached: an empty JSONL, no made-up lines');
    } finally {
      await host.stop(client);
      await llm.close();
      await close();
    }
  });
});
