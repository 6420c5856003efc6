/**
 * The pipeline end to end on the real dev server and real local sandboxes:
 * a batch of sample tasks with the scripted mixed policy, rewards and GRPO
 * advantages checked, trajectories and experiment records in the store, and a
 * resubmitted batch that does not duplicate work.
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadTrajectory } from '../../client/loadTrajectory.js';
import { submitBatch } from '../../client/submitBatch.js';
import type { GroupResult, RolloutResult } from '../../shared/pipeline.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');
const fixtures = resolve(dirname(fileURLToPath(import.meta.url)), '../fixtures/tasks');
let h: Harness;

before(async () => {
  h = await startHarness('e2e');
  await h.startWorkers();
});

after(async () => {
  await h.close();
});

async function collect(batch: Awaited<ReturnType<typeof submitBatch>>): Promise<Map<string, GroupResult>> {
  const out = new Map<string, GroupResult>();
  for await (const r of batch.results()) out.set(r.taskId, r);
  return out;
}

describe('end-to-end batch', { timeout: 600_000 }, () => {
  const batchId = `e2e-${Date.now()}`;
  const options = () => ({
    batchId,
    tasks: [join(examples, 'write-greeting'), join(examples, 'fix-median')],
    groupSize: 4,
    policy: { kind: 'scripted' as const, script: 'mixed' as const },
    taskQueues: h.taskQueues,
  });
  let results: Map<string, GroupResult>;

  test('every group completes with rewards from the verifier and GRPO advantages', async () => {
    const batch = await submitBatch(h.client, options());
    assert.deepEqual(batch.groups.map((g) => g.started), [true, true]);
    results = await collect(batch);
    assert.equal(results.size, 2);
    for (const group of results.values()) {
      assert.equal(group.status, 'complete', group.statusReason);
      assert.equal(group.validCount, 4);
      // mixed: even rollouts run the reference solution, odd ones a known-bad one.
      assert.deepEqual(group.rollouts.map((r) => r.reward), [1, 0, 1, 0]);
      assert.equal(group.meanReward, 0.5);
      assert.equal(group.stdReward, 0.5);
      for (const r of group.rollouts) {
        assert.equal(r.outcomeClass, 'ok');
        assert.equal(r.outcomeType, 'submitted');
        assert.equal(r.attempts, 1);
        assert.equal(r.turns, 3);
        assert.ok(Math.abs((r.advantage ?? NaN) - (r.reward === 1 ? 1 : -1)) < 1e-4, `advantage ${r.advantage}`);
        assert.ok(r.timings.provisionMs > 0 && r.timings.agentMs > 0 && r.timings.verifyMs > 0 && r.timings.teardownMs > 0, JSON.stringify(r.timings));
      }
    }
  });

  test('each rollout carries its experiment record', () => {
    const r = results.get('fix-median')?.rollouts[0];
    assert.ok(r?.experiment);
    assert.equal(r.experiment.taskId, 'fix-median');
    assert.match(r.experiment.taskVersion, /^[0-9a-f]{64}$/);
    assert.match(r.experiment.verifierHash, /^[0-9a-f]{64}$/);
    assert.match(r.experiment.toolInterfaceHash, /^[0-9a-f]{64}$/);
    assert.match(r.experiment.environmentIdentity, /^local:[0-9a-f]{64}$/);
    assert.deepEqual(r.experiment.policy, { kind: 'scripted', script: 'mixed' });
    assert.equal(r.experiment.limits.agentTimeoutSec, 300);
    assert.match(r.experiment.pipelineVersion, /^0\.1\.0\+/);
    assert.match(r.experiment.workerIdentity, /^test-worker@/);
    assert.equal(r.experiment.workerBuild, null, 'unversioned workers: no Worker Deployment build');
  });

  test('the trajectory store holds the conversation, tool outputs and verify result, keyed by rollout, attempt and turn', async () => {
    const ref = results.get('write-greeting')?.rollouts[0]?.trajectoryRef ?? '';
    const names = await h.store.list(ref, 'attempt-00/');
    assert.deepEqual(names, [
      'attempt-00/meta.json',
      'attempt-00/turn-0000.policy.json',
      'attempt-00/turn-0000.tool-00.json',
      'attempt-00/turn-0001.policy.json',
      'attempt-00/turn-0001.tool-00.json',
      'attempt-00/turn-0002.policy.json',
      'attempt-00/verify.json',
    ]);
    const run = await h.store.get<{ observation: string }>(ref, 'attempt-00/turn-0001.tool-00.json');
    assert.match(run?.observation ?? '', /^exit code: 0/);

    const [attempt] = await loadTrajectory(h.store, ref);
    assert.ok(attempt);
    assert.match(attempt.meta.instruction, /greeting\.txt/);
    assert.deepEqual(attempt.turns.map((t) => t.policy.assistant.tool_calls?.map((c) => c.function.name)), [['write_file'], ['bash'], ['submit']]);
    assert.deepEqual(attempt.turns.map((t) => t.tools.length), [1, 1, 0]);
    assert.equal(attempt.verify?.reward, 1);
  });

  test('the Temporal UI gets summaries: group and rollout workflows, and every activity call', async () => {
    const group = h.client.workflow.getHandle(`rollout/${batchId}/fix-median`);
    const groupDescription = await group.describe();
    assert.equal(await groupDescription.staticSummary(), 'group fix-median × 4 · scripted:mixed');
    assert.match((await groupDescription.staticDetails()) ?? '', /\*\*policy\*\* scripted:mixed/);
    const rollout = h.client.workflow.getHandle(`rollout/${batchId}/fix-median/0`);
    assert.equal(await (await rollout.describe()).staticSummary(), 'rollout 1 of 4 · fix-median');
    const history = await rollout.fetchHistory();
    const summaries = (history.events ?? [])
      // Activities, and local activities (markers the UI shows with their summaries).
      .filter((e) => e.activityTaskScheduledEventAttributes || e.markerRecordedEventAttributes?.markerName === 'core_local_activity')
      .map((e) => {
        const data = e.userMetadata?.summary?.data;
        return data ? (JSON.parse(Buffer.from(data).toString('utf8')) as string) : '(none)';
      });
    assert.equal(summaries.at(-1), 'record outcome ok/submitted', 'the finished rollout is recorded in the store (a local activity)');
    // The verdict and the teardown after it are one activity on the sandbox's host.
    assert.match(summaries.at(-2) ?? '', /^verify \(in-place\), then teardown sandbox sbx-[a-z0-9-]+$/);
    assert.deepEqual(summaries.slice(0, -2), [
      'provision local sandbox (attempt 1)',
      'turn 0: policy scripted:mixed',
      'turn 0: write_file: /solution/solve.sh',
      'turn 1: policy scripted:mixed',
      'turn 1: bash: bash /solution/solve.sh',
      'turn 2: policy scripted:mixed',
    ]);
  });

  test('clean-room verification and the agent time budget work through the pipeline', async () => {
    const batch = await submitBatch(h.client, {
      batchId: `${batchId}-clean`,
      tasks: [join(examples, 'ini-to-json')],
      groupSize: 2,
      policy: { kind: 'scripted', script: 'mixed' },
      verifyMode: 'clean-room',
      taskQueues: h.taskQueues,
    });
    const [group] = [...(await collect(batch)).values()];
    assert.deepEqual(group?.rollouts.map((r) => r.reward), [1, 0]);
    assert.equal(group?.rollouts[0]?.experiment?.verifyMode, 'clean-room');

    const slow = await submitBatch(h.client, {
      batchId: `${batchId}-budget`,
      tasks: [join(examples, 'write-greeting')],
      groupSize: 1,
      minValid: 1,
      policy: { kind: 'scripted', script: 'stall' },
      limits: { maxTurns: 1000, agentTimeoutSec: 1 },
      taskQueues: h.taskQueues,
    });
    const [budget] = [...(await collect(slow)).values()];
    const r = budget?.rollouts[0];
    assert.deepEqual([r?.outcomeClass, r?.outcomeType, r?.reward, r?.attempts], ['model', 'agent_timeout', 0, 1]);
  });

  test("a batch's --network reaches every sandbox and is recorded beside the task's own", async () => {
    const probe = join(fixtures, 'network-probe');
    const run = async (suffix: string, network?: 'none' | 'public'): Promise<RolloutResult | undefined> => {
      const batch = await submitBatch(h.client, {
        batchId: `${batchId}-net-${suffix}`,
        tasks: [probe],
        groupSize: 1,
        minValid: 1,
        policy: { kind: 'scripted', script: 'oracle' },
        ...(network ? { network } : {}),
        taskQueues: h.taskQueues,
      });
      return [...(await collect(batch)).values()][0]?.rollouts[0];
    };
    // The task says no-network: its sandbox has only loopback, and the verifier that looks for more scores 0.
    const own = await run('own');
    assert.equal(own?.reward, 0);
    assert.deepEqual(own?.experiment?.network, { mode: 'none', source: 'task.toml [environment].network_mode = "no-network"' });
    const opened = await run('public', 'public');
    assert.equal(opened?.reward, 1, 'the sandbox had a network interface beyond loopback');
    assert.deepEqual(opened?.experiment?.network, {
      mode: 'public',
      source: "the batch's network (rollout run --network public)",
      task: { mode: 'none', source: 'task.toml [environment].network_mode = "no-network"' },
    });
  });

  test('resubmitting the same batch attaches to the running or finished groups: no duplicated work', async () => {
    const again = await submitBatch(h.client, options());
    assert.deepEqual(again.groups.map((g) => g.started), [false, false]);
    const second = await collect(again);
    for (const [taskId, group] of second) assert.deepEqual(group, results.get(taskId));
    const runs: string[] = [];
    for await (const wf of h.client.workflow.list({ query: `RolloutBatch="${batchId}" AND WorkflowType="rollout"` })) runs.push(wf.workflowId);
    assert.equal(runs.length, 8, 'one rollout workflow per rollout, not two');
    assert.equal(new Set(runs).size, 8);
  });

  test('no sandbox is left behind', async () => {
    assert.deepEqual(await h.provider.list(), []);
  });
});
