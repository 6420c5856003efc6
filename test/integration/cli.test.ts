/**
 * The `rollout` command line as a user runs it: the embedded demo path
 * (its own dev server and workers), run and status against a running
 * pipeline, and bad input answered with exit code 2 and a clear message.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { TASK_QUEUES } from '../../shared/names.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { testServerAddress } from '../helpers/temporal.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const task = join(root, 'examples/tasks/write-greeting');
const scratch = mkdtempSync(join(tmpdir(), 'cli-test-'));

function rollout(args: string[], env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'warn' }): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolvePromise) => {
    const child = spawn(process.execPath, [join(root, 'client/bin/rollout.js'), ...args], { cwd: scratch, env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
  });
}

after(() => rmSync(scratch, { recursive: true, force: true }));

describe('rollout run --embedded (the demo path)', { timeout: 300_000 }, () => {
  test('starts its own server and workers, runs the batch, writes JSONL and prints the table and UI link', async () => {
    const data = join(scratch, 'embedded');
    const quiet = { ...process.env };
    delete quiet.LOG_LEVEL;
    const run = await rollout(['run', '--embedded', '--tasks', task, '--group-size', '2', '--batch-id', 'cli-embedded', '--data-dir', data], quiet);
    assert.equal(run.code, 0, run.stderr);
    // Without a TTY: each group's line once it finishes, the batch line; worker logs in a file, none on the console.
    assert.match(run.stderr, /^write-greeting +complete +2\/2 done +rewards 1 0$/m);
    assert.match(run.stderr, /^batch cli-embedded: 2\/2 rollouts done, 0 running, 0 failed · 1\/1 groups finished · \d+s elapsed, finished$/m);
    const logFile = join(data, 'logs/worker-cli-embedded.log');
    assert.ok(run.stderr.includes(`worker logs: ${logFile}`), run.stderr);
    assert.doesNotMatch(run.stdout + run.stderr, /"level":|No workflows registered/, 'no log lines and no SDK warnings on the console');
    const logged = readFileSync(logFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { msg: string; level: number });
    assert.ok(logged.some((l) => l.msg === 'pipeline workers running'), 'the workers log to the file');
    assert.deepEqual(logged.filter((l) => l.level >= 40), [], 'a normal run logs no warnings');
    assert.match(run.stdout, /write-greeting +complete +2\/2 +0\.50 +0\.50 +1 0 +ok\/submitted:2/);
    assert.match(run.stdout, /Temporal Web UI: http:\/\/127\.0\.0\.1:\d+\/namespaces\/default\/workflows\?query=RolloutBatch%3D%22cli-embedded%22/);
    const lines = readFileSync(join(data, 'results/cli-embedded.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { reward: number; taskId: string; experiment: unknown });
    assert.deepEqual(lines.map((l) => [l.taskId, l.reward]), [['write-greeting', 1], ['write-greeting', 0]]);
    assert.ok(lines.every((l) => l.experiment), 'each line carries its experiment record');
  });
});

describe('rollout run and status against running workers', { timeout: 300_000 }, () => {
  let h: Harness;
  before(async () => {
    h = await startHarness('cli', { taskQueues: TASK_QUEUES });
    await h.startWorkers();
  });
  after(async () => {
    await h.close();
  });

  test('run, then status shows the finished batch', async () => {
    const address = testServerAddress();
    const run = await rollout(['run', '--address', address, '--tasks', task, '--group-size', '2', '--batch-id', 'cli-remote', '--policy', 'scripted:oracle', '--data-dir', join(scratch, 'remote')]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /write-greeting +complete +2\/2 +1\.00/);
    const status = await rollout(['status', 'cli-remote', '--address', address]);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /write-greeting +complete +2\/2 +1\.00 +0\.00 +1 1/);
    assert.match(status.stdout, /^masked 0 of 2 \(0%\)$/m, 'the masked fraction of the batch');
    const again = await rollout(['run', '--address', address, '--tasks', task, '--group-size', '2', '--batch-id', 'cli-remote', '--policy', 'scripted:oracle', '--data-dir', join(scratch, 'remote')]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /1 already submitted earlier: attached, not restarted/);
  });

  test('status --watch follows a batch started elsewhere until it finishes, then prints the table', async () => {
    const address = testServerAddress();
    const started = rollout(['run', '--address', address, '--tasks', task, '--group-size', '3', '--batch-id', 'cli-watch', '--policy', 'scripted:mixed', '--data-dir', join(scratch, 'watch')]);
    let listed = await rollout(['status', 'cli-watch', '--address', address]);
    for (let i = 0; listed.code !== 0 && i < 60; i++) {
      await new Promise((r) => setTimeout(r, 500));
      listed = await rollout(['status', 'cli-watch', '--address', address]);
    }
    assert.equal(listed.code, 0, `the run submits its group: ${listed.stdout}${listed.stderr}`);
    const watch = await rollout(['status', 'cli-watch', '--watch', '--address', address]);
    assert.equal(watch.code, 0, watch.stderr);
    assert.match(watch.stderr, /^write-greeting +complete +3\/3 done +rewards 1 0 1$/m);
    assert.match(watch.stderr, /^batch cli-watch: 3\/3 rollouts done, 0 running, 0 failed · 1\/1 groups finished · \d+s elapsed, finished$/m);
    assert.match(watch.stdout, /write-greeting +complete +3\/3 +0\.67/);
    assert.equal((await started).code, 0);
  });

  test('gc --dry-run reports what it examined and removes nothing', async () => {
    const gc = await rollout(['gc', '--dry-run', '--address', testServerAddress()]);
    assert.equal(gc.code, 0, gc.stderr);
    assert.match(gc.stdout, /\d+ sandboxes examined, \d+ would remove, \d+ kept/);
  });

  test('report prints stage percentiles, outcomes and rewards, and writes a self-contained HTML page', async () => {
    const html = join(scratch, 'report.html');
    const report = await rollout(['report', 'cli-remote', '--html', html, '--address', testServerAddress()]);
    assert.equal(report.code, 0, report.stdout + report.stderr);
    assert.match(report.stdout, /batch cli-remote: 1 groups, 2 rollouts/);
    for (const stage of ['queue', 'provision', 'agent', 'verify', 'teardown']) assert.match(report.stdout, new RegExp(`^${stage} +\\d+ +\\d+ +\\d+$`, 'm'));
    assert.match(report.stdout, /^ok\/submitted +2$/m);
    assert.match(report.stdout, /^write-greeting +complete +2\/2 +0% +1\.00 +0\.00 +1×2$/m);
    assert.match(report.stdout, /^masked 0 of 2 \(0%\)$/m, 'the masked fraction of the batch');
    const page = readFileSync(html, 'utf8');
    assert.equal(page.match(/<svg /g)?.length, 7, 'five stage histograms, rewards per task, outcomes');
    assert.doesNotMatch(page, /<script|https?:\/\//, 'self-contained: no scripts, no external assets');
  });

  test('replay re-executes a rollout without the model and reproduces its reward', async () => {
    const replay = await rollout(['replay', 'rollout/cli-remote/write-greeting/0', '--trajectories', h.store.root, '--address', testServerAddress()]);
    assert.equal(replay.code, 0, replay.stdout + replay.stderr);
    assert.match(replay.stdout, /attempt 1: 2 recorded actions re-executed without the model/);
    assert.match(replay.stdout, /^1 +0 +0 +bash \{"command":"bash \/solution\/solve\.sh"\}$/m);
    assert.match(replay.stdout, /reward: original 1, replayed 1 → reproduced/);
    const missing = await rollout(['replay', 'rollout/cli-remote/write-greeting/0', '--trajectories', join(scratch, 'empty'), '--address', testServerAddress()]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /no trajectory for .* pass the trajectory store the workers used/);
  });

  test('replay-history replays a finished rollout against the current code', async () => {
    const replay = await rollout(['replay-history', 'rollout/cli-remote/write-greeting/0', '--address', testServerAddress()]);
    assert.equal(replay.code, 0, replay.stdout + replay.stderr);
    assert.match(replay.stdout, /^replays: rollout\/cli-remote\/write-greeting\/0 \(\d+ events\)/);
  });

  test('rerun runs the rollout again with the same experiment record and prints both side by side', async () => {
    const rerun = await rollout(['rerun', 'rollout/cli-remote/write-greeting/1', '--batch-id', 'cli-remote-rerun', '--address', testServerAddress()]);
    assert.equal(rerun.code, 0, rerun.stdout + rerun.stderr);
    assert.match(rerun.stdout, /^workflow +rollout\/cli-remote\/write-greeting\/1 +rollout\/cli-remote-rerun\/write-greeting\/1$/m);
    assert.match(rerun.stdout, /^reward +1 +1$/m);
    assert.match(rerun.stdout, /^taskVersion +[0-9a-f]{60}/m);
    assert.match(rerun.stdout, /same experiment record; reward reproduced/);
  });

  test('cancel of a finished rollout changes nothing; of an unknown one says so', async () => {
    const finished = await rollout(['cancel', 'rollout/cli-remote/write-greeting/0', '--reason', 'late', '--address', testServerAddress()]);
    assert.notEqual(finished.code, 0);
    const unknown = await rollout(['cancel', 'rollout/no-such/x/0', '--reason', 'test', '--address', testServerAddress()]);
    assert.equal(unknown.code, 2, unknown.stderr);
    assert.match(unknown.stderr, new RegExp(`^rollout: batch no-such is not on the server at ${testServerAddress().replace(/\./g, '\\.')} \\(it has batches \\S+`));
  });

  test('status of an unknown batch says so, and names the batches the server has', async () => {
    const status = await rollout(['status', 'no-such-batch', '--address', testServerAddress()]);
    assert.equal(status.code, 2);
    assert.match(status.stderr, /^rollout: batch no-such-batch is not on the server at \S+ \(it has batches \S+/);
  });
});

// About 30 CLI starts: 4 s each with the machine loaded by other test files (120 s ran out then).
describe('bad input gets exit code 2 and a message naming the problem', { timeout: 360_000 }, () => {
  const cases: [string[], RegExp][] = [
    [['run', '--tasks', join(scratch, 'missing')], /--tasks .*missing: not a directory/],
    [['run', '--tasks', task, '--group-size', '0'], /groupSize: a group needs at least 1 rollout/],
    [['run', '--tasks', task, '--group-size', '10000'], /groupSize: at most 1024 rollouts per group: .*use several groups or batches/],
    [['run', '--tasks', task, '--policy', 'magic'], /--policy "magic": use scripted:oracle/],
    [['run', '--tasks', task, '--policy', 'openai'], /--policy openai needs --base-url/],
    [['run', '--tasks', task, '--verify', 'sometimes'], /--verify is in-place or clean-room/],
    [['run', '--tasks', task, '--policy-calls', 'remote'], /--policy-calls is queue or local, got "remote"/],
    [['run', '--tasks', task, '--policy', 'openai', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'm', '--token-mode', 'exact'], /--token-mode "exact": use server, pipeline, off/],
    [['run', '--tasks', task, '--policy', 'openai', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'm', '--chat-template', join(scratch, 't.jinja')], /--chat-template .*t\.jinja is what the pipeline renders prompts with: add --token-mode pipeline/],
    [['run', '--tasks', task, '--policy', 'openai', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'm', '--token-mode', 'pipeline', '--chat-template', join(scratch, 'missing.jinja')], /chat template .*missing\.jinja: cannot read it \(ENOENT\)\. Fix: give a Jinja chat template/],
    [['run'], /--tasks is required/],
    [['run', '--tasks', task, '--bogus'], /unknown option --bogus \(rollout run --help lists its options\)/],
    [['status'], /name one batch id/],
    [['cancel', 'rollout/b/t/0'], /--reason is required/],
    [['cancel'], /name one rollout workflow id/],
    [['rerun'], /name one rollout workflow id/],
    [['worker', '--metrics', 'nine'], /--metrics "nine": give HOST:PORT/],
    [['worker', '--queue-prefix', 'a b'], /--queue-prefix "a b": use letters/],
    [['worker', '--build-id', 'v 2'], /--build-id "v 2": use 1-255 letters, digits/],
    [['worker', '--deployment-name', 'trainer'], /--deployment-name "trainer" needs --build-id/],
    [['worker', '--build-id', 'b1', '--stop-grace', 'soon'], /--stop-grace "soon": give the seconds/],
  ];
  for (const [args, message] of cases) {
    test(`rollout ${args.map((a) => (a.startsWith('/') ? '<dir>' : a)).join(' ')}`, async () => {
      const run = await rollout([...args, '--address', '127.0.0.1:1']);
      assert.equal(run.code, 2, run.stdout + run.stderr);
      assert.match(run.stderr, message);
      assert.doesNotMatch(run.stderr, /^\s+at /m, 'no stack trace');
    });
  }
});
