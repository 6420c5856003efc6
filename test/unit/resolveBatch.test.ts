/** Bad batch input is refused before anything starts, with the field named. */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BatchInputError, resolveBatch, type SubmitBatchOptions } from '../../client/submitBatch.js';

const task = join(resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks'), 'write-greeting');
const base: SubmitBatchOptions = { batchId: 'b1', tasks: [task], groupSize: 4, policy: { kind: 'scripted', script: 'mixed' } };

function refused(options: unknown, pattern: RegExp): void {
  assert.throws(() => resolveBatch(options as SubmitBatchOptions), (err: Error) => err instanceof BatchInputError && pattern.test(err.message));
}

test('valid options resolve with defaults from DESIGN.md', () => {
  const [input] = resolveBatch(base);
  assert.ok(input);
  assert.equal(input.task.id, 'write-greeting');
  assert.deepEqual(input.failurePolicy, { infra: { retries: 2, backoffSec: 1, onExhausted: 'mask' }, model: 'score', task: 'fail_group', resume: 'restart', failedAttemptReward: 0, maxMaskedFraction: 0.5 });
  assert.equal(input.limits.maxTurns, 30);
  assert.equal(input.verifyMode, 'in-place');
});

test('group sizes of 0 and 10,000 are refused', () => {
  refused({ ...base, groupSize: 0 }, /groupSize: a group needs at least 1 rollout/);
  refused({ ...base, groupSize: 10_000 }, /groupSize: at most 1024 rollouts per group/);
});

test('an unknown policy kind or script is refused', () => {
  refused({ ...base, policy: { kind: 'magic' } }, /policy/);
  refused({ ...base, policy: { kind: 'scripted', script: 'genius' } }, /policy\.script/);
  refused({ ...base, policy: { kind: 'openai', baseUrl: 'not a url', model: 'm' } }, /policy\.baseUrl/);
});

test('a bad batch id, a missing task and a duplicated task are refused', () => {
  refused({ ...base, batchId: 'has spaces' }, /batchId/);
  refused({ ...base, tasks: ['/nonexistent/task'] }, /is not a task directory/);
  refused({ ...base, tasks: [task, task] }, /appears twice/);
  refused({ ...base, tasks: [] }, /no tasks/);
});

test('a task directory whose name cannot be a task id (a quote breaks the queries that find its rollouts) is refused, named', () => {
  const parent = mkdtempSync(join(tmpdir(), 'task-id-'));
  try {
    const odd = join(parent, 'say "hi"');
    cpSync(task, odd, { recursive: true });
    refused({ ...base, tasks: [odd] }, new RegExp(`task\\.id \\(${odd.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\): a task id .* rename the task directory`));
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
});
