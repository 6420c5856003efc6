/**
 * Issue 29: a signal sent to whatever launched `rollout run` stops it exactly
 * as Ctrl-C does. A trainer's program starts `npx rollout run --embedded ...`
 * and signals that child alone (not its process group, as subprocess.Popen's
 * send_signal does): npm exec runs the command through the project's
 * script-shell (.npmrc: bash, which execs it), forwards SIGINT and SIGTERM to
 * it, and the run cancels its groups and tears every sandbox down. A launcher
 * killed outright (SIGKILL) hands the run to init, which the run takes as
 * SIGTERM.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { countLeaks, leaksUnder } from '../faults/faultKit.js';
import { eventually } from '../helpers/eventually.js';
import { processesMentioning } from '../helpers/localSandboxInspector.js';
import { startScriptedOpenAIServer, type Script } from '../helpers/scriptedOpenAIServer.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const task = join(root, 'examples/tasks', 'write-greeting');
const scratch = mkdtempSync(join(tmpdir(), 'cli-launchers-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Every rollout sits in a long tool call. */
const stuck: Script = () => ({ content: 'Working.', toolCalls: [{ name: 'bash', arguments: { command: 'sleep 300' } }] });

interface Launched {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `npx rollout run --embedded ...` from the checkout, as a program starts it (not detached: its group is the test's). */
function npxRun(name: string, baseUrl: string, options: { ownGroup?: boolean } = {}): { launched: Launched; data: string; sandboxRoot: string } {
  const data = join(scratch, name, 'data');
  const sandboxRoot = join(scratch, name, 'sandboxes');
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'warn', ROLLOUT_SANDBOX_ROOT: sandboxRoot };
  delete env.TEMPORAL_ADDRESS;
  // The test runner is itself under `npm test`: a program starting npx has none of npm's variables.
  for (const key of Object.keys(env)) if (key.startsWith('npm_')) delete env[key];
  const child = spawn('npx', ['rollout', 'run', '--embedded', '--tasks', task, '--group-size', '2', '--batch-id', `launch-${name}`, '--policy', 'openai', '--base-url', baseUrl, '--model', 'm', '--data-dir', data], { cwd: root, env, detached: options.ownGroup ?? false });
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.on('close', (code, signal) => r({ code, signal })));
  return { launched: { child, output: () => output, exited }, data, sandboxRoot };
}

async function inToolCall(sandboxRoot: string, n: number): Promise<void> {
  const provider = new LocalSandboxProvider({ stateRoot: sandboxRoot });
  await eventually(async () => (await provider.list()).filter((s) => s.alive).length, (alive) => alive === n, `${n} sandboxes up`, 180_000);
  await new Promise((r) => setTimeout(r, 1_000));
}

function noTrace(sandboxRoot: string, data: string, what: string): Promise<unknown> {
  return eventually(async () => ({ leaks: countLeaks(leaksUnder(sandboxRoot, [])), processes: processesMentioning(data).length }), (v) => v.leaks === 0 && v.processes === 0, `${what}: no sandbox, mount, dev server or worker of the run left`, 60_000);
}

describe('a signal to the launcher of rollout run', { timeout: 900_000 }, () => {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    test(`${signal} to the npx process alone stops the run as Ctrl-C does: groups cancelled, no sandbox left`, async (t) => {
      const llm = await startScriptedOpenAIServer(stuck);
      const { launched, data, sandboxRoot } = npxRun(signal.toLowerCase(), llm.baseUrl);
      try {
        await inToolCall(sandboxRoot, 2);
        const at = Date.now();
        launched.child.kill(signal);
        const ended = await Promise.race([launched.exited, new Promise<'still running'>((r) => setTimeout(() => r('still running'), 60_000))]);
        assert.notEqual(ended, 'still running', `the run was still going 60 s after ${signal}:\n${launched.output()}`);
        t.diagnostic(`${signal} to npx → exit in ${Date.now() - at} ms`);
        assert.match(launched.output(), new RegExp(`interrupted \\(${signal}\\): cancelling 1 unfinished groups of batch launch-${signal.toLowerCase()}`));
        assert.match(launched.output(), /every cancelled rollout tore its sandbox down\./);
        await noTrace(sandboxRoot, data, `after ${signal} to npx`);
      } finally {
        if (launched.child.exitCode === null) launched.child.kill('SIGKILL');
        await llm.close();
      }
    });
  }

  test('Ctrl-C in a terminal (SIGINT to the whole group: npm and the run, and npm forwards its copy) is one interrupt: the run stops in order', async () => {
    const llm = await startScriptedOpenAIServer(stuck);
    const { launched, data, sandboxRoot } = npxRun('ctrl-c', llm.baseUrl, { ownGroup: true });
    try {
      await inToolCall(sandboxRoot, 2);
      process.kill(-(launched.child.pid as number), 'SIGINT');
      await launched.exited;
      assert.match(launched.output(), /interrupted \(SIGINT\): cancelling 1 unfinished groups of batch launch-ctrl-c/);
      assert.doesNotMatch(launched.output(), /SIGINT again/, 'npm’s forwarded copy is not taken for a second Ctrl-C');
      assert.match(launched.output(), /every cancelled rollout tore its sandbox down\./);
      await noTrace(sandboxRoot, data, 'after Ctrl-C to the group');
    } finally {
      await llm.close();
    }
  });

  test('SIGKILL of the npx process: the run notices its launcher is gone and stops in order', async () => {
    const llm = await startScriptedOpenAIServer(stuck);
    const { launched, data, sandboxRoot } = npxRun('sigkill', llm.baseUrl);
    try {
      await inToolCall(sandboxRoot, 2);
      launched.child.kill('SIGKILL');
      await launched.exited;
      await noTrace(sandboxRoot, data, 'after SIGKILL of npx');
    } finally {
      await llm.close();
    }
  });
});
