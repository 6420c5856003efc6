/**
 * Records the histories the replay test checks every change against: one
 * rolloutGroup, one rollout (with a turn of two tool calls), one rollout whose attempt ran on its
 * host with that attempt's workflow, the root and the branch of a tree group (group.branching: a child
 * rollout started at a turn, restored by replay), and one janitor run, from real runs on the dev server. Run after an intentional, versioned workflow change:
 *   npm run histories:record
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { submitBatch } from '../../client/submitBatch.js';
import { hostTaskQueue } from '../../shared/names.js';
import { startHarness } from '../helpers/pipelineHarness.js';
import { testServerAddress } from '../helpers/temporal.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const out = join(root, 'test/fixtures/histories');

test('record workflow histories for the replay test', { timeout: 300_000 }, async () => {
  const h = await startHarness('record');
  try {
    await h.startWorkers();
    const batchId = 'recorded';
    const batch = await submitBatch(h.client, {
      batchId,
      // two-file-solution: the reference solution's first turn writes two files, so the rollout recorded
      // below has a turn whose tool calls run as one activity (the tool-calls-of-a-turn-in-one-activity patch).
      tasks: [join(root, 'examples/tasks/fix-median'), join(root, 'test/fixtures/tasks/two-file-solution')],
      groupSize: 2,
      policy: { kind: 'scripted', script: 'mixed' },
      taskQueues: h.taskQueues,
    });
    for await (const group of batch.results()) if (group.status !== 'complete') throw new Error(`group ${group.status}`);
    // A rollout whose attempt runs on its sandbox's host (group.attemptOn 'host'): the rollout and its attempt workflow.
    const onHost = await submitBatch(h.client, { batchId: `${batchId}-on-host`, tasks: [join(root, 'test/fixtures/tasks/two-file-solution')], groupSize: 1, minValid: 1, attemptOn: 'host', policy: { kind: 'scripted', script: 'oracle' }, taskQueues: h.taskQueues });
    for await (const group of onHost.results()) if (group.status !== 'complete') throw new Error(`group ${group.status}`);
    // A tree group (group.branching): the root starts a branch at turn 1 as its child; the branch restores the root's turn 0 by replay.
    const tree = await submitBatch(h.client, { batchId: `${batchId}-tree`, tasks: [join(root, 'test/fixtures/tasks/two-file-solution')], groupSize: 1, minValid: 1, branching: { atTurns: [1], width: 2 }, policy: { kind: 'scripted', script: 'oracle' }, taskQueues: h.taskQueues });
    for await (const group of tree.results()) if (group.status !== 'complete' || group.rollouts.length !== 2) throw new Error(`tree group ${group.status} with ${group.rollouts.length} rollouts`);
    const janitorId = `janitor-recorded-${Date.now()}`;
    await h.client.workflow.execute('janitor', { taskQueue: h.taskQueues.main, workflowId: janitorId, args: [{ hostQueue: hostTaskQueue(h.host) }] });

    // The CLI writes history in the proto JSON format that historyFromJSON reads back.
    const cli = process.env.TEMPORAL_CLI_PATH;
    if (!cli) throw new Error('TEMPORAL_CLI_PATH is not set: run this through `npm run histories:record`');
    const save = (name: string, workflowId: string): void => {
      const json = execFileSync(cli, ['workflow', 'show', '--address', testServerAddress(), '--workflow-id', workflowId, '--output', 'json'], { encoding: 'utf8' });
      writeFileSync(join(out, `${name}.json`), json.endsWith('\n') ? json : `${json}\n`);
    };
    save('rolloutGroup', `rollout/${batchId}/fix-median`);
    save('rollout', `rollout/${batchId}/two-file-solution/0`);
    save('janitor', janitorId);
    save('rollout.attempt-on-host', `rollout/${batchId}-on-host/two-file-solution/0`);
    save('rolloutAttempt', `rollout/${batchId}-on-host/two-file-solution/0/attempt-0`);
    save('rollout.tree-root', `rollout/${batchId}-tree/two-file-solution/0`);
    save('rollout.tree-branch', `rollout/${batchId}-tree/two-file-solution/1`);
  } finally {
    await h.close();
  }
});
