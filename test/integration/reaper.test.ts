/**
 * Guaranteed cleanup: terminating workflows skips their finally blocks, so
 * their sandboxes are left running; the janitor (on its Temporal Schedule, or
 * `rollout gc`) removes exactly those, plus expired leases, and keeps the
 * sandboxes of workflows that are still open.
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { ReapReport } from '../../sandboxes/reaper/reapSandboxes.js';
import { submitBatch } from '../../client/submitBatch.js';
import { hostTaskQueue, rolloutWorkflowId } from '../../shared/names.js';
import { ensureJanitorSchedule, janitorScheduleId } from '../../workers/janitorSchedule.js';
import { rolloutProgressQuery } from '../../workflows/definitions.js';
import { LocalSandboxInspector } from '../helpers/localSandboxInspector.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { eventually } from '../helpers/eventually.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');
const inspector = new LocalSandboxInspector();
let h: Harness;

before(async () => {
  h = await startHarness('reaper');
  await h.startWorkers();
});

after(async () => {
  await h.close();
});


function runJanitor(dryRun: boolean): Promise<ReapReport> {
  return h.client.workflow.execute('janitor', {
    taskQueue: h.taskQueues.main,
    workflowId: `janitor-test-${Date.now()}-${Math.random().toString(36).slice(2)}`,
    args: [{ hostQueue: hostTaskQueue(h.host), dryRun }],
  });
}

/** A workflow that stays open: nobody polls its task queue. */
async function openOwner(): Promise<{ workflowId: string; runId: string }> {
  const handle = await h.client.workflow.start('nobodyRunsThis', { taskQueue: `${h.taskQueues.main}-nobody`, workflowId: `open-owner-${Date.now()}` });
  return { workflowId: handle.workflowId, runId: handle.firstExecutionRunId };
}

describe('the reaper', { timeout: 600_000 }, () => {
  test('terminated rollouts leave sandboxes; the janitor removes them and nothing else', async () => {
    const owner = await openOwner();
    const { handle: kept } = await h.provider.provision({ environmentDir: join(examples, 'write-greeting/environment'), owner: { ...owner, attempt: 0 } });

    const batchId = `reaper-${Date.now()}`;
    await submitBatch(h.client, { batchId, tasks: [join(examples, 'write-greeting')], groupSize: 2, policy: { kind: 'scripted', script: 'stall' }, limits: { maxTurns: 1000 }, taskQueues: h.taskQueues });
    const rollouts = [0, 1].map((i) => h.client.workflow.getHandle(rolloutWorkflowId(batchId, 'write-greeting', i)));
    for (const r of rollouts) await eventually(() => r.query(rolloutProgressQuery).catch(() => undefined), (p) => p?.stage === 'agent', 'rollout in its agent loop');
    // Terminate skips `finally`: the sandboxes of these two rollouts stay behind.
    for (const r of rollouts) await r.terminate('fault injection: terminate skips cleanup');
    await h.client.workflow.getHandle(`rollout/${batchId}/write-greeting`).terminate('done');
    const orphans = (await h.provider.list()).filter((s) => s.owner.workflowId.startsWith(`rollout/${batchId}/`));
    assert.equal(orphans.length, 2, 'two orphaned sandboxes');
    for (const o of orphans) if (o.handle) inspector.track(o.handle);

    const preview = await runJanitor(true);
    assert.deepEqual(preview.reaped.map((r) => r.reason).sort(), ['owner-closed', 'owner-closed']);
    assert.equal((await h.provider.list()).length, 3, 'a dry run removes nothing');

    const report = await runJanitor(false);
    assert.deepEqual(report.reaped.map((r) => r.id).sort(), orphans.map((o) => o.id).sort());
    assert.ok(report.reaped.every((r) => r.processesKilled >= 2), JSON.stringify(report.reaped));
    assert.deepEqual(report.kept.map((k) => k.id), [kept.id], 'the sandbox of an open workflow is kept');
    for (const o of orphans) {
      if (o.handle) assert.deepEqual(await inspector.leftovers(o.handle), { processes: [], mounts: [], directories: [], other: [] });
    }
    await h.provider.teardown(kept);
    await h.client.workflow.getHandle(owner.workflowId).terminate('done');
  });

  test('an expired lease is reaped even while its owner is open', async () => {
    const owner = await openOwner();
    const { handle } = await h.provider.provision({ environmentDir: join(examples, 'write-greeting/environment'), owner: { ...owner, attempt: 0 }, leaseMs: 1 });
    await new Promise((r) => setTimeout(r, 20));
    const report = await runJanitor(false);
    assert.deepEqual(report.reaped.map((r) => [r.id, r.reason]), [[handle.id, 'lease-expired']]);
    assert.deepEqual(await h.provider.list(), []);
    await h.client.workflow.getHandle(owner.workflowId).terminate('done');
  });

  test('the janitor schedule runs the reaper by itself', async () => {
    const { handle } = await h.provider.provision({ environmentDir: join(examples, 'write-greeting/environment'), owner: { workflowId: 'never-existed', runId: '', attempt: 0 } });
    const scheduleId = await ensureJanitorSchedule(h.client, { host: h.host, mainQueue: h.taskQueues.main, every: '1 hour' });
    assert.equal(scheduleId, janitorScheduleId(h.host));
    assert.equal(await ensureJanitorSchedule(h.client, { host: h.host, mainQueue: h.taskQueues.main }), scheduleId, 'idempotent');
    const schedule = h.client.schedule.getHandle(scheduleId);
    try {
      await schedule.trigger();
      await eventually(() => h.provider.list(), (l) => l.length === 0, `sandbox ${handle.id} reaped by the scheduled janitor`);
    } finally {
      await schedule.delete();
    }
  });
});
