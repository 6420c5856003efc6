/**
 * Operator controls on the real dev server: cancelling one rollout of a
 * running group through the cancelRollout update (the group goes on, the
 * sandbox goes away), and rerunning a finished rollout with the same
 * experiment record (same task version, policy and per-turn sampling seeds).
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { rerunRollout, RerunError } from '../../client/rerunRollout.js';
import { submitBatch } from '../../client/submitBatch.js';
import { groupWorkflowId, rolloutWorkflowId } from '../../shared/names.js';
import type { GroupResult, RolloutResult } from '../../shared/pipeline.js';
import { cancelRolloutUpdate, rolloutProgressQuery } from '../../workflows/definitions.js';
import { eventually } from '../helpers/eventually.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { startScriptedOpenAIServer } from '../helpers/scriptedOpenAIServer.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');
let h: Harness;

before(async () => {
  h = await startHarness('operator');
  await h.startWorkers();
});

after(async () => {
  await h.close();
});

describe('operator controls', { timeout: 600_000 }, () => {
  test('cancelRollout stops one rollout mid-turn: its sandbox goes, it ends cancelled/operator, the rest of the group finishes', async () => {
    const batchId = `cancel-one-${Date.now()}`;
    const batch = await submitBatch(h.client, {
      batchId,
      taskQueues: h.taskQueues,
      tasks: [join(examples, 'write-greeting')],
      groupSize: 3,
      minValid: 2,
      policy: { kind: 'scripted', script: 'stall' },
      limits: { maxTurns: 12 },
    });
    const target = h.client.workflow.getHandle(rolloutWorkflowId(batchId, 'write-greeting', 1));
    await eventually(() => target.query(rolloutProgressQuery).catch(() => undefined), (p) => p?.stage === 'agent' && p.turn >= 2, 'rollout 1 in its agent loop');

    await assert.rejects(target.executeUpdate(cancelRolloutUpdate, { args: [{ reason: '  ' }] }), (err: unknown) => {
      assert.ok(err instanceof WorkflowUpdateFailedError);
      assert.match(String(err.cause?.message), /needs a reason/);
      return true;
    });
    const accepted = await target.executeUpdate(cancelRolloutUpdate, { args: [{ reason: 'operator test: looping' }] });
    assert.equal(accepted.accepted, true);
    assert.equal(accepted.stage, 'agent');

    const [group] = await (async () => {
      const out: GroupResult[] = [];
      for await (const g of batch.results()) out.push(g);
      return out;
    })();
    assert.ok(group);
    const cancelled = group.rollouts[1] as RolloutResult;
    assert.deepEqual([cancelled.outcomeClass, cancelled.outcomeType, cancelled.reward, cancelled.valid, cancelled.advantage], ['cancelled', 'operator', null, false, null]);
    assert.equal(cancelled.attemptHistory.at(-1)?.message, 'operator test: looping', 'the reason is kept in the attempt history');
    for (const i of [0, 2]) {
      const r = group.rollouts[i] as RolloutResult;
      assert.deepEqual([r.outcomeClass, r.outcomeType, r.valid], ['model', 'max_turns', true], `rollout ${i} ran to its own end`);
    }
    assert.equal(group.validCount, 2);
    assert.equal(group.status, 'complete');
    assert.deepEqual(await h.provider.list(), [], 'the cancelled rollout tore its sandbox down');

    const late = await target.executeUpdate(cancelRolloutUpdate, { args: [{ reason: 'too late' }] }).catch((err: unknown) => err);
    // A closed workflow cannot take updates: the server says so; nothing changes.
    assert.ok(late instanceof Error, 'an update to a finished rollout is refused');
    assert.equal(((await target.result()) as RolloutResult).outcomeType, 'operator');
  });

  test('rerun starts a new rollout with the same experiment record: same task version, policy and per-turn seeds', async () => {
    const server = await startScriptedOpenAIServer((_req, turn) =>
      turn === 0
        ? { content: 'Writing it.', toolCalls: [{ name: 'bash', arguments: { command: "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt" } }] }
        : { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] },
    );
    try {
      const batchId = `rerun-${Date.now()}`;
      const batch = await submitBatch(h.client, {
        batchId,
        taskQueues: h.taskQueues,
        tasks: [join(examples, 'write-greeting')],
        groupSize: 2,
        minValid: 1,
        policy: { kind: 'openai', baseUrl: server.baseUrl, model: 'scripted-model', sampling: { seed: 1234, temperature: 0.7 } },
      });
      for await (const g of batch.results()) assert.equal(g.status, 'complete', g.statusReason);
      const originalId = rolloutWorkflowId(batchId, 'write-greeting', 1);
      const seedsOf = (from: number): (number | undefined)[] => server.requests.slice(from).map((r) => r.seed);
      const originalSeeds = new Set(seedsOf(0));
      const before = server.requests.length;

      const rerun = await rerunRollout({ client: h.client, workflowId: originalId });
      assert.equal(rerun.rerunWorkflowId, rolloutWorkflowId(rerun.rerun.trajectoryRef.split('/')[0] ?? '', 'write-greeting', 1));
      assert.notEqual(rerun.rerunWorkflowId, originalId);
      assert.ok(rerun.sameExperiment, JSON.stringify(rerun.fields.filter((f) => f.pinned && !f.same)));
      assert.equal(rerun.rerun.experiment?.taskVersion, rerun.original.experiment?.taskVersion);
      assert.deepEqual(rerun.rerun.experiment?.policy, rerun.original.experiment?.policy);
      assert.deepEqual([rerun.original.reward, rerun.rerun.reward], [1, 1]);
      const rerunSeeds = seedsOf(before);
      assert.equal(rerunSeeds.length, 2, 'two turns, two policy requests');
      for (const seed of rerunSeeds) assert.ok(originalSeeds.has(seed), `rerun seed ${seed} was used by the original rollout 1 (seeds ${[...originalSeeds].join(',')})`);

      await assert.rejects(rerunRollout({ client: h.client, workflowId: groupWorkflowId(batchId, 'write-greeting') }), (err: unknown) => err instanceof RerunError && /not a rollout/.test(err.message));
      await assert.rejects(rerunRollout({ client: h.client, workflowId: 'rollout/no-such-batch/t/0' }), RerunError);
    } finally {
      await server.close();
    }
  });
});
