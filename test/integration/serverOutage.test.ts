/**
 * The trainer's client rides out its Temporal server. A batch runs against a
 * `rollout worker` and a dev server of this test's own (state in SQLite);
 * while `rollout run` waits for the results, the server is stalled
 * (SIGSTOP: its connections stay open, nothing answers) and later stopped and
 * started again on the same --db-filename and port. `rollout run` must say it
 * is waiting (once per outage) and that the server is back, write every
 * rollout of every group to the JSONL (the group that finished before the
 * restart included), and exit 0 without a stack trace; `rollout status` and
 * the Python example, started while the server is down, wait for it too.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { freePort, startDevServer, type RunningDevServer } from '../../servers/temporalDevServer.js';
import { countLeaks, FaultHost } from '../faults/faultKit.js';
import { eventually } from '../helpers/eventually.js';
import { startScriptedOpenAIServer, type Script } from '../helpers/scriptedOpenAIServer.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const scratch = mkdtempSync(join(tmpdir(), 'outage-'));
const greeting = join(root, 'examples/tasks/write-greeting');
const counting = join(root, 'examples/tasks/count-log-errors');
const WRITE_GREETING = "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt";

after(() => rmSync(scratch, { recursive: true, force: true }));

/** write-greeting's rollouts work 10 s, count-log-errors' 100 s: one group finishes before the restart, one after. */
const script: Script = (req, turn) => {
  if (turn > 0) return { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] };
  const isGreeting = req.messages.some((m) => typeof m.content === 'string' && m.content.includes('greeting.txt'));
  return { content: 'Working.', toolCalls: [{ name: 'bash', arguments: { command: isGreeting ? `sleep 10; ${WRITE_GREETING}` : 'sleep 100' } }] };
};

interface Proc {
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function run(file: string, args: string[], env: Record<string, string> = {}): Proc {
  const child = spawn(file, args, { cwd: scratch, env: { ...process.env, LOG_LEVEL: 'warn', ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return { stdout: () => stdout, stderr: () => stderr, exited: new Promise((r) => child.on('close', (code) => r(code))) };
}

const rollout = (args: string[]): Proc => run(process.execPath, [join(root, 'client/bin/rollout.js'), ...args]);

test('rollout run, rollout status and the Python example wait through a stalled and a restarted Temporal server; every result arrives', { timeout: 900_000 }, async (t) => {
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const dbFilename = join(scratch, 'temporal.sqlite');
  mkdirSync(scratch, { recursive: true });
  const serverOptions = { port, uiPort: false as const, dbFilename, logFile: join(scratch, 'server.log') };
  let server: RunningDevServer = await startDevServer(serverOptions);
  const host = new FaultHost(scratch, 'outage');
  const llm = await startScriptedOpenAIServer(script);
  const batchId = `outage-${Date.now()}`;
  try {
    await host.startWorker({ address });
    const client = rollout(['run', '--address', address, '--queue-prefix', host.prefix, '--tasks', greeting, '--tasks', counting, '--group-size', '2', '--min-valid', '1', '--batch-id', batchId, '--policy', 'openai', '--base-url', llm.baseUrl, '--model', 'm', '--data-dir', host.dataDir]);
    await eventually(async () => llm.requests.length, (n) => n >= 4, 'all four rollouts in their first turn', 120_000);

    // 1. The server hangs: SIGSTOP keeps its sockets open, nothing answers.
    process.kill(server.pid, 'SIGSTOP');
    await eventually(async () => client.stderr(), (e) => e.includes(`waiting for the Temporal server at ${address} (for the results of batch ${batchId})`), 'rollout run says it waits for the stalled server', 120_000);
    await sleep(20_000);
    process.kill(server.pid, 'SIGCONT');
    await eventually(async () => client.stderr(), (e) => e.includes(`the Temporal server at ${address} answers again`), 'rollout run says the server is back', 120_000);

    // 2. The server goes away and comes back on the same SQLite file and port, longer than the SDK's own retries.
    await server.stop();
    const status = rollout(['status', batchId, '--address', address]);
    const python = process.env.ROLLOUT_TRAINER_PYTHON
      ? run(process.env.ROLLOUT_TRAINER_PYTHON, [join(root, 'examples/python-trainer/submit_group.py'), greeting, `${batchId}-py`, '1'], { TEMPORAL_ADDRESS: address, ROLLOUT_MAIN_QUEUE: host.taskQueues.main, ROLLOUT_POLICY_QUEUE: host.taskQueues.policy })
      : undefined;
    await sleep(30_000);
    server = await startDevServer(serverOptions);

    const code = await client.exited;
    const stderr = client.stderr();
    t.diagnostic(`rollout run's stderr:\n${stderr}`);
    assert.equal(code, 0, stderr);
    assert.doesNotMatch(stderr, /ServiceError|Failed to get Workflow execution history|at .*\.(ts|js):\d+/, 'no error, no stack trace');
    const waits = stderr.match(/waiting for the Temporal server at /g) ?? [];
    const backs = stderr.match(/answers again; carrying on/g) ?? [];
    assert.ok(waits.length >= 1 && waits.length <= 2, `said once per outage that it waits:\n${stderr}`);
    assert.equal(backs.length, waits.length, 'and each time that the server was back');
    const lines = readFileSync(join(host.dataDir, 'results', `${batchId}.jsonl`), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { taskId: string; index: number; reward: number | null });
    assert.deepEqual(lines.map((l) => `${l.taskId}/${l.index}:${l.reward}`).sort(), ['count-log-errors/0:0', 'count-log-errors/1:0', 'write-greeting/0:1', 'write-greeting/1:1'], 'every rollout of both groups, each once');
    assert.match(client.stdout(), /count-log-errors +complete +2\/2/);
    assert.match(client.stdout(), /write-greeting +complete +2\/2 +1\.00/);

    const statusCode = await status.exited;
    assert.equal(statusCode, 0, status.stderr());
    assert.match(status.stderr(), new RegExp(`waiting for the Temporal server at ${address.replaceAll('.', '\\.')} \\(for a connection\\)`));
    assert.match(status.stdout(), /write-greeting|count-log-errors/);

    if (python) {
      const pyCode = await python.exited;
      assert.equal(pyCode, 0, python.stderr());
      assert.match(python.stderr(), new RegExp(`waiting for the Temporal server at ${address.replaceAll('.', '\\.')} \\(for a connection\\)`));
      assert.deepEqual((JSON.parse(python.stdout()) as { rewards: number[] }).rewards, [1]);
    }
    await eventually(async () => host.leaks(), (l) => countLeaks(l) === 0, 'no sandbox left', 30_000);
  } finally {
    const connection = await Connection.connect({ address }).catch(() => undefined);
    if (connection) {
      await host.stop(new Client({ connection }));
      await connection.close();
    }
    await llm.close();
    await server.stop();
  }
});
