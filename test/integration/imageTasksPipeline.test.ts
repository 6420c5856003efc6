/**
 * Dockerfile tasks through the real pipeline (dev server, workers, local
 * sandboxes on images built here): a batch with scripted:oracle of the image
 * fixture and, where ../shared/real-tasks is present, TB2's headless-terminal
 * and sqlite-db-truncate. Every rollout scores 1 and its experiment record
 * names the image, the original FROM and its substitute. Needs
 * scripts/ensure-image-tools.sh (ROLLOUT_IMAGE_TOOLS).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { replayRollout } from '../../client/replayRollout.js';
import { submitBatch } from '../../client/submitBatch.js';
import type { GroupResult } from '../../shared/pipeline.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const tb2 = join(process.env.ROLLOUT_REAL_TASKS ?? resolve(root, '../shared/real-tasks'), 'terminal-bench-2');
const realTasks = ['headless-terminal', 'sqlite-db-truncate'].map((t) => join(tb2, t)).filter((dir) => existsSync(dir));
const noTools = process.env.ROLLOUT_IMAGE_TOOLS ? false : 'needs image tools: run scripts/ensure-image-tools.sh and export the ROLLOUT_IMAGE_TOOLS it prints';

describe('Dockerfile tasks through the pipeline', { timeout: 1_800_000, skip: noTools }, () => {
  let h: Harness;
  before(async () => {
    h = await startHarness('image-tasks');
    await h.startWorkers();
  });
  after(async () => {
    await h.close();
  });

  test(`scripted:oracle scores 1 on every rollout (image fixture${realTasks.length ? ` and TB2 ${realTasks.map((d) => d.split('/').at(-1)).join(', ')}` : `; TB2 tasks skipped: ${tb2} is absent`})`, async () => {
    const batch = await submitBatch(h.client, {
      batchId: `image-tasks-${Date.now()}`,
      tasks: [join(root, 'test/fixtures/image-task'), ...realTasks],
      groupSize: 2,
      policy: { kind: 'scripted', script: 'oracle' },
      taskQueues: h.taskQueues,
    });
    const results: GroupResult[] = [];
    for await (const group of batch.results()) results.push(group);
    assert.equal(results.length, 1 + realTasks.length);
    for (const group of results) {
      assert.equal(group.status, 'complete', `${group.taskId}: ${group.statusReason}`);
      for (const r of group.rollouts) {
        assert.equal(r.reward, 1, `${group.taskId}/${r.index}: ${r.outcomeClass}/${r.outcomeType} ${r.attemptHistory.map((a) => a.message).join(' | ')}`);
        // TB2's task.toml sets no network: Harbor's default, the internet; the fixture says no-network.
        assert.equal(r.experiment?.network?.mode, group.taskId === 'image-task' ? 'none' : 'public', `${group.taskId}: ${JSON.stringify(r.experiment?.network)}`);
        assert.match(r.experiment?.environmentIdentity ?? '', /^local:image:sha256:[0-9a-f]{64} built here; FROM environment\/Dockerfile:\d+: FROM python:3\.13-slim-bookworm -> Debian bookworm minbase with CPython 3\.13\.\d+ built from source/);
      }
      // Both rollouts of a group ran on one image.
      assert.equal(new Set(group.rollouts.map((r) => r.experiment?.environmentIdentity)).size, 1);
    }
    // `rollout replay` of a Dockerfile task runs its calls on the same image, in the image's WORKDIR, and reproduces the reward.
    const fixture = results.find((g) => g.taskId === 'image-task')?.rollouts[0];
    assert.ok(fixture);
    const provider = new LocalSandboxProvider({ stateRoot: join(h.scratch, 'replay-sandboxes') });
    const replay = await replayRollout({ client: h.client, store: h.store, provider, workflowId: fixture.workflowId });
    assert.equal(replay.replayedReward, 1, JSON.stringify(replay.actions));
    assert.equal(replay.reproduced, true);
    assert.deepEqual(replay.divergent, []);
    assert.deepEqual(await provider.list(), [], 'the replay left no sandbox');
  });
});
