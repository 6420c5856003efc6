/**
 * No reward dodging (issue 15), end to end on the real dev server with real
 * local sandboxes and the oracle policy: a solution that makes verification
 * impossible is scored as a failed attempt (class model, reward 0, one
 * attempt, not masked), with the evidence in the attempt history, the
 * trajectory store and the workflow history; the evidence that lets an
 * attempt be masked has to show the infrastructure failed.
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { submitBatch } from '../../client/submitBatch.js';
import type { GroupResult, RolloutResult } from '../../shared/pipeline.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';

const fixtures = resolve(dirname(fileURLToPath(import.meta.url)), '../fixtures/tasks');
let h: Harness;
let seq = 0;

before(async () => {
  h = await startHarness('attribution');
  await h.startWorkers();
});

after(async () => {
  await h.close();
});

async function runOracle(task: string, groupSize = 2): Promise<GroupResult> {
  const batch = await submitBatch(h.client, {
    batchId: `attr-${Date.now()}-${seq++}`,
    taskQueues: h.taskQueues,
    tasks: [join(fixtures, task)],
    groupSize,
    minValid: 1,
    policy: { kind: 'scripted', script: 'oracle' },
    failurePolicy: { infra: { retries: 2, backoffSec: 0 } },
  });
  const results: GroupResult[] = [];
  for await (const r of batch.results()) results.push(r);
  assert.equal(results.length, 1);
  return results[0] as GroupResult;
}

function describeRollout(r: RolloutResult): string {
  return `${r.outcomeClass}/${r.outcomeType} reward ${r.reward} valid ${r.valid} attempts ${r.attempts}: ${r.attemptHistory.map((a) => `${a.outcomeClass}/${a.outcomeType} ${a.message}`).join(' | ')}`;
}

describe('failure attribution: an agent cannot turn a 0 into a masked attempt', { timeout: 600_000 }, () => {
  test('a solution that replaces the file the tests read with a named pipe: model/verifier_blocked, reward 0, one attempt, evidence kept', async () => {
    const group = await runOracle('dodge-fifo');
    assert.equal(group.status, 'complete', group.statusReason);
    for (const r of group.rollouts) {
      assert.deepEqual([r.outcomeClass, r.outcomeType, r.reward, r.valid, r.attempts], ['model', 'verifier_blocked', 0, true, 1], describeRollout(r));
      const last = r.attemptHistory.at(-1);
      assert.ok(last?.evidence && last.evidence.length > 0, `the attempt history carries the evidence: ${JSON.stringify(last)}`);
      assert.ok(last.evidence.some((e) => /control/.test(e) && /untouched start/.test(e)), `the control run is named: ${JSON.stringify(last.evidence)}`);
      const stored = await h.store.get<{ failure: string; evidence: string[] }>(r.trajectoryRef, 'attempt-00/attribution.json');
      assert.equal(stored?.failure, 'model/verifier_blocked', 'the trajectory keeps the attribution');
      const history = await h.client.workflow.getHandle(r.workflowId).fetchHistory();
      const failed = (history.events ?? []).map((e) => e.activityTaskFailedEventAttributes?.failure).find((f) => f?.applicationFailureInfo?.type === 'model/verifier_blocked');
      assert.match(failed?.message ?? '', /control/, 'the Temporal UI shows the evidence on the failed verify');
    }
    assert.equal(group.masked?.count, 0, 'nothing masked');
    assert.deepEqual((await h.provider.list()).length, 0, 'no sandbox left, control sandboxes included');
  });

  test('a solution that kills every process it can signal: the sandbox survives, the attempt is scored 0, never masked or retried', async () => {
    const group = await runOracle('dodge-kill-all');
    assert.equal(group.status, 'complete', group.statusReason);
    for (const r of group.rollouts) {
      assert.deepEqual([r.reward, r.valid, r.attempts], [0, true, 1], describeRollout(r));
      assert.ok(
        r.attemptHistory.every((a) => a.outcomeClass !== 'infra'),
        `no attempt is blamed on the infrastructure: ${describeRollout(r)}`,
      );
    }
    assert.equal(group.masked?.count, 0, 'nothing masked');
  });
});
