/**
 * A Python trainer using the official temporalio SDK starts rolloutGroup by
 * name with plain JSON (task named only by its directory) and reads the
 * result: the cross-language contract trainers rely on.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadTask } from '../../tasks/loadTask.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { testServerAddress } from '../helpers/temporal.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
let h: Harness;

before(async () => {
  h = await startHarness('python');
  await h.startWorkers();
});

after(async () => {
  await h.close();
});

function runPython(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const python = process.env.ROLLOUT_TRAINER_PYTHON;
  assert.ok(python, 'ROLLOUT_TRAINER_PYTHON is set by scripts/setup.sh test (run the tests through `bash scripts/with-env.sh --for test npm test`)');
  return new Promise((resolvePromise) => {
    const child = spawn(python, [join(root, 'examples/python-trainer/submit_group.py'), ...args], {
      env: { ...process.env, TEMPORAL_ADDRESS: testServerAddress(), ROLLOUT_MAIN_QUEUE: h.taskQueues.main, ROLLOUT_POLICY_QUEUE: h.taskQueues.policy },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
  });
}

test('the Python example runs a group by name and reads rewards and advantages', { timeout: 300_000 }, async () => {
  const taskDir = join(root, 'examples/tasks/count-log-errors');
  const run = await runPython([taskDir, `py-${Date.now()}`, '2']);
  assert.equal(run.code, 0, run.stderr);
  const result = JSON.parse(run.stdout) as { status: string; taskVersion: string; rewards: number[]; advantages: number[] };
  assert.equal(result.status, 'complete');
  assert.equal(result.taskVersion, loadTask(taskDir).version, 'the workflow pinned the task version');
  assert.deepEqual(result.rewards, [1, 0]);
  assert.ok(Math.abs((result.advantages[0] ?? NaN) - 1) < 1e-4 && Math.abs((result.advantages[1] ?? NaN) + 1) < 1e-4);
});

test('bad input from Python is refused by the workflow, naming the field', { timeout: 300_000 }, async () => {
  const run = await runPython([join(root, 'examples/tasks/count-log-errors'), `py-bad-${Date.now()}`, '0']);
  assert.equal(run.code, 1);
  assert.match(run.stderr, /groupSize/);
});
