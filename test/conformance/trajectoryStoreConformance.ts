/**
 * What every trajectory store must do, run against each backend (filesystem
 * and PostgreSQL): documents round-trip exactly, rewrites are idempotent,
 * listing has one meaning, finished rollouts are queryable by batch, task and
 * outcome, and concurrent writers do not duplicate anything.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RolloutRecord, TrajectoryStore } from '../../stores/trajectoryStore.js';
import type { OutcomeClass, RolloutResult } from '../../shared/pipeline.js';

function rolloutRecord(batchId: string, taskId: string, index: number, outcomeClass: OutcomeClass, reward: number | null): RolloutRecord {
  const result: RolloutResult = {
    index,
    workflowId: `rollout/${batchId}/${taskId}/${index}`,
    reward,
    advantage: null,
    valid: reward !== null,
    outcomeClass,
    outcomeType: outcomeClass === 'ok' ? 'submitted' : outcomeClass === 'model' ? 'max_turns' : 'sandbox_lost',
    attempts: 1,
    attemptHistory: [],
    turns: 3,
    timings: { queueMs: 1, provisionMs: 2, agentMs: 3, verifyMs: 4, teardownMs: 5 },
    trajectoryRef: `${batchId}/${taskId}/${index}`,
    experiment: null,
  };
  return { batchId, taskId, taskVersion: `v-${taskId}`, result };
}

export function trajectoryStoreSuite(name: string, open: () => Promise<TrajectoryStore>): void {
  describe(`trajectory store conformance: ${name}`, { timeout: 120_000 }, () => {
    let store: TrajectoryStore;
    const ref = `b-${Date.now()}/task-a/0`;

    before(async () => {
      store = await open();
    });
    after(async () => {
      await store.close();
    });

    test('a document round-trips exactly: nesting, unicode, NUL characters, big and small numbers, nulls', async () => {
      const doc = { turn: 3, text: 'naïve ✓ 日本 \u0000 after-nul \uFFFD', nested: { list: [1, 2.5, -0.000001, 1e21, null, true], empty: {} }, big: Number.MAX_SAFE_INTEGER };
      await store.put(ref, 'attempt-00/turn-0003.policy.json', doc);
      assert.deepEqual(await store.get(ref, 'attempt-00/turn-0003.policy.json'), doc);
    });

    test('a missing document is undefined, not an error', async () => {
      assert.equal(await store.get(ref, 'attempt-09/nothing.json'), undefined);
      assert.equal(await store.get('no-batch/no-task/0', 'rollout.json'), undefined);
    });

    test('rewriting a key (a retried activity) replaces the document; it is listed once', async () => {
      await store.put(ref, 'attempt-00/turn-0004.tool-00.json', { v: 1 });
      await store.put(ref, 'attempt-00/turn-0004.tool-00.json', { v: 2 });
      assert.deepEqual(await store.get(ref, 'attempt-00/turn-0004.tool-00.json'), { v: 2 });
      assert.equal((await store.list(ref, 'attempt-00/turn-0004')).length, 1);
    });

    test('list names the documents directly under the prefix folder, sorted, none deeper', async () => {
      const r = `${ref}-list`;
      for (const n of ['attempt-00/meta.json', 'attempt-00/turn-0001.policy.json', 'attempt-00/turn-0000.policy.json', 'attempt-01/meta.json', 'rollout.json']) await store.put(r, n, { n });
      assert.deepEqual(await store.list(r, 'attempt-00/'), ['attempt-00/meta.json', 'attempt-00/turn-0000.policy.json', 'attempt-00/turn-0001.policy.json']);
      assert.deepEqual(await store.list(r, 'attempt-00/turn-'), ['attempt-00/turn-0000.policy.json', 'attempt-00/turn-0001.policy.json']);
      assert.deepEqual(await store.list(r), ['rollout.json']);
      assert.deepEqual(await store.list(`${r}-none`, 'attempt-00/'), []);
    });

    test('20 concurrent writers of one key leave one document holding one of their values', async () => {
      await Promise.all(Array.from({ length: 20 }, (_, i) => store.put(ref, 'attempt-02/turn-0000.policy.json', { writer: i })));
      const got = await store.get<{ writer: number }>(ref, 'attempt-02/turn-0000.policy.json');
      assert.ok(got && got.writer >= 0 && got.writer < 20);
      assert.deepEqual(await store.list(ref, 'attempt-02/'), ['attempt-02/turn-0000.policy.json']);
    });

    test('a 4 MB document (a long tool output) round-trips', async () => {
      const doc = { observation: 'x'.repeat(4 * 1024 * 1024) };
      await store.put(ref, 'attempt-03/turn-0000.tool-00.json', doc);
      assert.equal((await store.get<{ observation: string }>(ref, 'attempt-03/turn-0000.tool-00.json'))?.observation.length, doc.observation.length);
    });

    test('finished rollouts are queryable by batch, task and outcome class; re-recording replaces', async () => {
      const b1 = `q1-${Date.now()}`;
      const b2 = `q2-${Date.now()}`;
      const records = [
        rolloutRecord(b1, 'alpha', 1, 'model', 0),
        rolloutRecord(b1, 'alpha', 0, 'ok', 1),
        rolloutRecord(b1, 'beta', 0, 'infra', null),
        rolloutRecord(b2, 'alpha', 0, 'ok', 0),
      ];
      for (const r of records) await store.putRollout(r);
      await store.putRollout(rolloutRecord(b1, 'alpha', 1, 'ok', 1)); // re-recorded (e.g. a retried activity)
      const ids = (rs: RolloutRecord[]): string[] => rs.map((r) => r.result.workflowId);
      assert.deepEqual(ids(await store.queryRollouts({ batchId: b1 })), [`rollout/${b1}/alpha/0`, `rollout/${b1}/alpha/1`, `rollout/${b1}/beta/0`]);
      assert.deepEqual(ids(await store.queryRollouts({ batchId: b1, taskId: 'alpha' })), [`rollout/${b1}/alpha/0`, `rollout/${b1}/alpha/1`]);
      assert.deepEqual(ids(await store.queryRollouts({ batchId: b1, outcomeClass: 'infra' })), [`rollout/${b1}/beta/0`]);
      assert.deepEqual(ids(await store.queryRollouts({ batchId: b1, outcomeClass: 'model' })), [], 'the re-recorded rollout is ok now');
      const [record] = await store.queryRollouts({ batchId: b2 });
      assert.deepEqual(record, records[3], 'the whole record round-trips');
      assert.deepEqual(await store.queryRollouts({ batchId: 'no-such-batch' }), []);
    });
  });
}
