/**
 * Determinism guard: recorded histories of every workflow type
 * (test/fixtures/histories, made by `npm run histories:record`) must replay
 * against the current workflow code. A change that would break running
 * workflows fails here, in CI, before it reaches a worker.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { defaultPayloadConverter } from '@temporalio/common';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { rolloutWorkflowId } from '../../shared/names.js';
import type { RolloutInput } from '../../shared/pipeline.js';
import { bundlePipelineWorkflows } from '../../workers/pipelineWorkers.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dir = join(root, 'test/fixtures/histories');
const load = (name: string) => historyFromJSON(JSON.parse(readFileSync(join(dir, name), 'utf8')));

// <type>.json is recorded from the current code; <type>.<label>.json are kept from older versions,
// so workflows started by an older deployment still replay (versioned with patched()).
const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();

test('there is a recorded history for every workflow type, from the current code', () => {
  for (const type of ['janitor', 'rollout', 'rolloutGroup', 'rolloutAttempt']) assert.ok(files.includes(`${type}.json`), `${type}.json (npm run histories:record)`);
});

/**
 * The workflow id to replay a history under, the one it ran with: a rollout's from its input; an
 * attempt workflow's from the rollout it names in its child id (`<rollout id>/attempt-<n>`).
 */
function workflowIdOf(file: string): string {
  const history = load(file);
  // A rollout's id is its batch, task and index (a tree's branches are named from it too).
  const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
  const payload = started?.input?.payloads?.[0];
  if (started?.workflowType?.name === 'rollout' && payload) {
    const input = defaultPayloadConverter.fromPayload<RolloutInput>(payload);
    return rolloutWorkflowId(input.group.batchId, input.group.task.id, input.index);
  }
  for (const event of history.events ?? []) {
    const child = event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId;
    if (child) return child.replace(/\/attempt-\d+$/, '');
  }
  return `recorded-${file}`;
}

for (const file of files) {
  test(`the recorded history ${file} replays against the current code`, { timeout: 120_000 }, async () => {
    // The bundle the workers use (built once per content, workers/workflowBundleCache.ts).
    await Worker.runReplayHistory({ workflowBundle: await bundlePipelineWorkflows() }, load(file), workflowIdOf(file));
  });
}

test('a deliberately non-deterministic change to rollout is caught', { timeout: 120_000 }, async () => {
  await assert.rejects(
    Worker.runReplayHistory({ workflowsPath: join(root, 'test/fixtures/workflows/rolloutChanged.ts') }, load('rollout.json'), 'recorded-rollout'),
    (err: unknown) => err instanceof DeterminismViolationError,
  );
});
