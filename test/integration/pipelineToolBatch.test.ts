/**
 * The tool calls a policy asks for in one turn run as one activity (runTools):
 * one hand-off per turn instead of one per call, while the Temporal UI still
 * shows every call (the activity's summary names each, its result has each
 * call's outcome) and the trajectory keeps one record per call. Real dev
 * server, real local sandboxes, the oracle on a task whose solution is two files.
 */
import assert from 'node:assert/strict';
import { dirname, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { defaultPayloadConverter } from '@temporalio/common';
import { loadTrajectory } from '../../client/loadTrajectory.js';
import { submitBatch } from '../../client/submitBatch.js';
import type { ToolCallsStepOutput } from '../../activities/contract.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';

const task = resolve(dirname(fileURLToPath(import.meta.url)), '../fixtures/tasks/two-file-solution');
let h: Harness;

before(async () => {
  h = await startHarness('toolbatch');
  await h.startWorkers();
});

after(async () => {
  await h.close();
});

test('a turn with two tool calls is one runTools activity that shows both calls', { timeout: 300_000 }, async () => {
  const batchId = `toolbatch-${Date.now()}`;
  const batch = await submitBatch(h.client, { batchId, tasks: [task], groupSize: 1, minValid: 1, policy: { kind: 'scripted', script: 'oracle' }, taskQueues: h.taskQueues });
  const groups = [];
  for await (const g of batch.results()) groups.push(g);
  assert.equal(groups.length, 1);
  const [group] = groups;
  assert.equal(group?.status, 'complete', group?.statusReason);
  assert.deepEqual(
    group?.rollouts.map((r) => [r.reward, r.outcomeType]),
    [[1, 'submitted']],
    'both files were written by the one activity, so the solution ran and passed',
  );

  const history = await h.client.workflow.getHandle(`rollout/${batchId}/two-file-solution/0`).fetchHistory();
  const events = history.events ?? [];
  const scheduled = events
    .filter((e) => e.activityTaskScheduledEventAttributes)
    .map((e) => ({
      id: Number(e.eventId),
      type: e.activityTaskScheduledEventAttributes?.activityType?.name ?? '?',
      summary: e.userMetadata?.summary ? defaultPayloadConverter.fromPayload<string>(e.userMetadata.summary) : '(none)',
    }));
  const toolSteps = scheduled.filter((s) => s.type === 'runTool' || s.type === 'runTools');
  assert.deepEqual(
    toolSteps.map((s) => [s.type, s.summary]),
    [
      ['runTools', 'turn 0: 2 tool calls: write_file: /solution/solve.sh · write_file: /solution/write.sh'],
      ['runTool', 'turn 1: bash: bash /solution/solve.sh'],
    ],
  );
  // Every call's outcome is in the activity's result, which the UI shows beside the summary.
  const batched = toolSteps[0];
  const completed = events.find((e) => Number(e.activityTaskCompletedEventAttributes?.scheduledEventId) === batched?.id);
  const payload = completed?.activityTaskCompletedEventAttributes?.result?.payloads?.[0];
  assert.ok(payload, 'the runTools activity completed with a result');
  const result = defaultPayloadConverter.fromPayload<ToolCallsStepOutput>(payload);
  assert.deepEqual(
    result.calls.map((c) => [c.name, c.summary, c.malformed]),
    [
      ['write_file', 'write_file: /solution/solve.sh', false],
      ['write_file', 'write_file: /solution/write.sh', false],
    ],
  );
  assert.ok(events.some((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch'), 'the new command sequence is behind patched()');

  const [attempt] = await loadTrajectory(h.store, `${batchId}/two-file-solution/0`);
  assert.ok(attempt);
  assert.deepEqual(
    attempt.turns.map((t) => t.tools.map((r) => [r.name, r.observation.startsWith('wrote ')])),
    [[['write_file', true], ['write_file', true]], [['bash', false]], []],
  );
});
