/**
 * Failure handling end to end (real dev server, real sandboxes; faults
 * injected only at the edge): the openai policy against a scripted
 * OpenAI-compatible server that returns 503s, provision failures and a
 * sandbox killed mid-turn retried on fresh sandboxes, max turns scored,
 * persistent infra failures masked out of the advantages, a changed task
 * failing its group, and cancellation leaving no sandbox behind.
 */
import assert from 'node:assert/strict';
import { cpSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { submitBatch, type SubmitBatchOptions } from '../../client/submitBatch.js';
import type { PolicyTurnRecord } from '../../agent/conversation.js';
import type { GroupResult } from '../../shared/pipeline.js';
import { rolloutProgressQuery } from '../../workflows/definitions.js';
import { rolloutWorkflowId } from '../../shared/names.js';
import { FaultyProvider } from '../helpers/faultyProvider.js';
import { runOneGroup, startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { startScriptedOpenAIServer } from '../helpers/scriptedOpenAIServer.js';
import { eventually } from '../helpers/eventually.js';
import { ClassifiedError } from '../../shared/failures.js';
import type { TrajectoryStore } from '../../stores/trajectoryStore.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');
let h: Harness;

before(async () => {
  h = await startHarness('failures');
});

after(async () => {
  await h.close();
});

const runOne = (options: Omit<SubmitBatchOptions, 'batchId' | 'taskQueues'>): Promise<GroupResult> => runOneGroup(h, 'fail', options);


describe('pipeline failure handling', { timeout: 900_000 }, () => {
  test('openai policy: 503s are waited out on the policy queue, never shown to the model; tool calls, seed and logprobs flow', async () => {
    const server = await startScriptedOpenAIServer((_req, turn) =>
      turn === 0
        ? { content: 'I will write the file.', toolCalls: [{ name: 'bash', arguments: { command: "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt" } }] }
        : { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] },
    );
    server.failNext(2, 503);
    await h.startWorkers();
    try {
      const group = await runOne({
        tasks: [join(examples, 'write-greeting')],
        groupSize: 1,
        minValid: 1,
        policy: { kind: 'openai', baseUrl: server.baseUrl, model: 'scripted-model', sampling: { seed: 7, temperature: 0.3, logprobs: true } },
      });
      const r = group.rollouts[0];
      assert.ok(r);
      assert.deepEqual([r.reward, r.outcomeClass, r.outcomeType, r.attempts, r.turns], [1, 'ok', 'submitted', 1, 2]);
      assert.equal(server.requests.length, 4, '2 injected 503s, then one request per turn');
      const lastRequest = server.requests.at(-1);
      assert.equal(lastRequest?.model, 'scripted-model');
      assert.equal(lastRequest?.temperature, 0.3);
      assert.equal(typeof lastRequest?.seed, 'number');
      assert.ok(lastRequest?.tools?.length === 4, 'the four tool schemas are offered');
      const observation = lastRequest?.messages.find((m) => m.role === 'tool');
      assert.match(observation?.content ?? '', /^exit code: 0/);
      assert.ok(!JSON.stringify(lastRequest?.messages).includes('injected failure'), 'the 503s never reach the conversation');
      const turn0 = await h.store.get<PolicyTurnRecord>(r.trajectoryRef, 'attempt-00/turn-0000.policy.json');
      assert.ok(turn0?.tokens?.logprobs, 'logprobs are kept in the trajectory');
      assert.equal(turn0?.usage?.prompt_tokens, 100);
    } finally {
      await h.stopWorkers();
      await server.close();
    }
  });

  test('a policy turn whose answer was recorded but whose completion was lost is retried without asking the model again: the turn keeps its one answer', async () => {
    const server = await startScriptedOpenAIServer((_req, turn) =>
      turn === 0
        ? { content: 'I will write the file.', toolCalls: [{ name: 'bash', arguments: { command: "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt" } }] }
        : { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] },
    );
    // The fault at the edge: the first write of turn 0's answer lands, and its acknowledgement is lost.
    let lostAcks = 0;
    const store: TrajectoryStore = Object.assign(Object.create(h.store) as TrajectoryStore, {
      put: async (ref: string, name: string, value: unknown): Promise<void> => {
        await h.store.put(ref, name, value);
        if (name === 'attempt-00/turn-0000.policy.json' && lostAcks === 0) {
          lostAcks++;
          throw new ClassifiedError('infra', 'storage_error', `injected: the write of ${name} landed but its acknowledgement was lost`);
        }
      },
    });
    await h.startWorkers({ store });
    try {
      const group = await runOne({ tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, policy: { kind: 'openai', baseUrl: server.baseUrl, model: 'scripted-model', sampling: { seed: 7 } } });
      const r = group.rollouts[0];
      assert.ok(r);
      assert.equal(lostAcks, 1, 'the fault was injected');
      assert.deepEqual([r.reward, r.outcomeClass, r.attempts, r.turns], [1, 'ok', 1, 2]);
      assert.equal(server.requests.length, 2, 'one model call per turn: the retried turn returned the recorded answer');
      const names = await h.store.list(r.trajectoryRef, 'attempt-00/');
      assert.deepEqual(names.filter((n) => n.endsWith('.policy.json')), ['attempt-00/turn-0000.policy.json', 'attempt-00/turn-0001.policy.json']);
    } finally {
      await h.stopWorkers();
      await server.close();
    }
  });

  test('policy endpoint faults — 429 with retry-after, a hung request, a non-JSON body, no choices — are each classified infra/policy_unavailable, retried with backoff, never shown to the model', async () => {
    const server = await startScriptedOpenAIServer((_req, turn) =>
      turn === 0
        ? { content: 'Writing.', toolCalls: [{ name: 'bash', arguments: { command: "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt" } }] }
        : { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] },
    );
    server.failNext(1, 429, { 'retry-after': '3' });
    server.misbehaveNext('unresponsive');
    server.misbehaveNext('not-json');
    server.misbehaveNext('no-choices');
    const times: number[] = [];
    const seen = server.requests;
    const timer = setInterval(() => {
      while (times.length < seen.length) times.push(Date.now());
    }, 20);
    await h.startWorkers();
    try {
      const group = await runOne({
        tasks: [join(examples, 'write-greeting')],
        groupSize: 1,
        minValid: 1,
        policy: { kind: 'openai', baseUrl: server.baseUrl, model: 'scripted-model', requestTimeoutMs: 1_500 },
      });
      const r = group.rollouts[0];
      assert.ok(r);
      assert.deepEqual([r.reward, r.outcomeClass, r.outcomeType, r.attempts, r.turns], [1, 'ok', 'submitted', 1, 2]);
      assert.equal(server.requests.length, 6, '4 misbehaving answers, then one request per turn');
      assert.ok((times[1] ?? 0) - (times[0] ?? 0) >= 2_900, `the retry after the 429 waited for retry-after: 3 (${(times[1] ?? 0) - (times[0] ?? 0)} ms)`);
      const history = await h.client.workflow.getHandle(r.workflowId).fetchHistory();
      const policyStarts = (history.events ?? []).map((e) => e.activityTaskStartedEventAttributes).filter((a) => a?.attempt !== undefined && a.attempt !== null && a.attempt > 1);
      assert.equal(policyStarts.length, 1, 'only the first policy call needed retries');
      assert.equal(policyStarts[0]?.attempt, 5, 'four failed tries, the fifth answered');
      assert.equal(policyStarts[0]?.lastFailure?.applicationFailureInfo?.type, 'infra/policy_unavailable');
      const conversation = JSON.stringify(server.requests.at(-1)?.messages);
      assert.doesNotMatch(conversation, /429|rate limit|not JSON|no choices|timeout|bad gateway/i, 'no fault reached the conversation');
    } finally {
      clearInterval(timer);
      await h.stopWorkers();
      await server.close();
    }
  });

  test('a failed provision and a sandbox killed mid-turn are infra failures, each retried on a fresh sandbox', async () => {
    let killed = false;
    const faulty = new FaultyProvider(h.provider, {
      failProvision: (_spec, count) => count === 0,
      killBeforeExec: (_h, command) => {
        if (killed || !command.includes('solve.sh')) return false;
        killed = true;
        return true;
      },
    });
    await h.startWorkers({ provider: faulty });
    try {
      const group = await runOne({
        tasks: [join(examples, 'fix-median')],
        groupSize: 1,
        minValid: 1,
        policy: { kind: 'scripted', script: 'oracle' },
        failurePolicy: { infra: { retries: 2, backoffSec: 0 } },
      });
      const r = group.rollouts[0];
      assert.ok(r);
      assert.deepEqual(
        r.attemptHistory.map((a) => `${a.outcomeClass}/${a.outcomeType}`),
        ['infra/provision_failed', 'infra/sandbox_lost', 'ok/submitted'],
      );
      assert.deepEqual([r.reward, r.valid, r.attempts], [1, true, 3]);
      assert.equal(faulty.injected, 2);
      assert.deepEqual(await h.provider.list(), [], 'the killed sandbox was torn down too');
    } finally {
      await h.stopWorkers();
    }
  });

  test('max turns is a model failure: verified, scored and not retried', async () => {
    await h.startWorkers();
    try {
      const group = await runOne({
        tasks: [join(examples, 'write-greeting')],
        groupSize: 1,
        minValid: 1,
        policy: { kind: 'scripted', script: 'stall' },
        limits: { maxTurns: 3 },
      });
      const r = group.rollouts[0];
      assert.ok(r);
      assert.deepEqual([r.outcomeClass, r.outcomeType, r.reward, r.valid, r.attempts, r.turns], ['model', 'max_turns', 0, true, 1, 3]);
    } finally {
      await h.stopWorkers();
    }
  });

  test('a persistent infra failure is masked: excluded from the baseline, and a short group is reported insufficient', async () => {
    const faulty = new FaultyProvider(h.provider, { failProvision: (spec) => spec.labels?.rollout === '2' });
    await h.startWorkers({ provider: faulty });
    try {
      const group = await runOne({
        tasks: [join(examples, 'write-greeting')],
        groupSize: 4,
        minValid: 4,
        policy: { kind: 'scripted', script: 'mixed' },
        failurePolicy: { infra: { retries: 1, backoffSec: 0 } },
      });
      const masked = group.rollouts[2];
      assert.ok(masked);
      assert.deepEqual([masked.valid, masked.reward, masked.advantage, masked.outcomeClass, masked.outcomeType, masked.attempts], [false, null, null, 'infra', 'provision_failed', 2]);
      assert.deepEqual(group.rollouts.map((r) => r.reward), [1, 0, null, 0]);
      assert.ok(Math.abs((group.meanReward ?? NaN) - 1 / 3) < 1e-9, 'the mean is over the 3 valid rollouts');
      const std = Math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 3);
      assert.ok(Math.abs((group.rollouts[0]?.advantage ?? NaN) - (2 / 3) / std) < 1e-4);
      assert.equal(group.validCount, 3);
      assert.equal(group.status, 'insufficient');
      assert.match(group.statusReason, /3 valid rollouts, fewer than minValid 4/);
    } finally {
      await h.stopWorkers();
    }
  });

  test('the guard on masking: a group masked past failurePolicy.maxMaskedFraction is insufficient, with the fraction by type', async () => {
    const faulty = new FaultyProvider(h.provider, { failProvision: (spec) => spec.labels?.rollout === '1' || spec.labels?.rollout === '2' });
    await h.startWorkers({ provider: faulty });
    try {
      const group = await runOne({
        tasks: [join(examples, 'write-greeting')],
        groupSize: 4,
        minValid: 2,
        policy: { kind: 'scripted', script: 'oracle' },
        failurePolicy: { infra: { retries: 0, backoffSec: 0 }, maxMaskedFraction: 0.25 },
      });
      assert.equal(group.validCount, 2, 'enough valid rollouts for minValid');
      assert.deepEqual(group.masked, { count: 2, fraction: 0.5, byClass: { infra: 2 }, byType: { 'infra/provision_failed': 2 }, maxFraction: 0.25 });
      assert.equal(group.status, 'insufficient');
      assert.match(group.statusReason, /masked 2 of 4 \(50%\): infra\/provision_failed 2, more than failurePolicy\.maxMaskedFraction 0\.25/);
    } finally {
      await h.stopWorkers();
    }
  });

  test('a task changed after submission fails its group fast, never retried', async () => {
    const dir = join(h.scratch, 'changing-task');
    cpSync(join(examples, 'write-greeting'), dir, { recursive: true });
    const batch = await submitBatch(h.client, {
      batchId: `fail-changed-${Date.now()}`,
      taskQueues: h.taskQueues,
      tasks: [dir],
      groupSize: 2,
      policy: { kind: 'scripted', script: 'oracle' },
    });
    writeFileSync(join(dir, 'instruction.md'), 'Something else entirely.\n');
    await h.startWorkers();
    try {
      const groups: GroupResult[] = [];
      for await (const g of batch.results()) groups.push(g);
      const group = groups[0];
      assert.ok(group);
      assert.equal(group.status, 'task_invalid');
      assert.match(group.statusReason, /the task changed since the batch was submitted/);
      for (const r of group.rollouts) assert.deepEqual([r.outcomeClass, r.outcomeType, r.attempts], ['task', 'invalid_spec', 1]);
    } finally {
      await h.stopWorkers();
    }
  });

  test('a sandbox that becomes ready after its rollout was cancelled is torn down by the provisioning worker, not orphaned', async () => {
    await h.startWorkers({ provider: new FaultyProvider(h.provider, { provisionDelayMs: 6_000 }) });
    try {
      const batch = await submitBatch(h.client, { batchId: `late-provision-${Date.now()}`, taskQueues: h.taskQueues, tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, policy: { kind: 'scripted', script: 'noop' } });
      await eventually(async () => (await h.provider.list()).length, (n) => n === 1, 'the sandbox exists while provision still runs');
      await batch.groups[0]?.handle.cancel();
      await assert.rejects(batch.groups[0]?.handle.result() ?? Promise.resolve());
      // The heartbeat carries the cancellation to the activity, which removes the sandbox it made.
      await eventually(async () => (await h.provider.list()).length, (n) => n === 0, 'the late sandbox was torn down', 30_000);
    } finally {
      await h.stopWorkers();
    }
  });

  test('cancelling a group cancels its rollouts and leaves no sandbox behind', async () => {
    await h.startWorkers();
    try {
      const batchId = `cancel-${Date.now()}`;
      const batch = await submitBatch(h.client, {
        batchId,
        taskQueues: h.taskQueues,
        tasks: [join(examples, 'write-greeting')],
        groupSize: 2,
        policy: { kind: 'scripted', script: 'stall' },
        limits: { maxTurns: 1000 },
      });
      const rollouts = [0, 1].map((i) => h.client.workflow.getHandle(rolloutWorkflowId(batchId, 'write-greeting', i)));
      for (const r of rollouts) {
        await eventually(
          () => r.query(rolloutProgressQuery).catch(() => undefined),
          (p) => p?.stage === 'agent' && p.turn >= 2,
          'rollout reaches its agent loop',
        );
      }
      assert.equal((await h.provider.list()).length, 2, 'two live sandboxes while the group runs');
      await batch.groups[0]?.handle.cancel();
      await assert.rejects(batch.groups[0]?.handle.result() ?? Promise.resolve());
      for (const r of rollouts) await eventually(async () => (await r.describe()).status.name, (s) => s === 'CANCELLED', 'rollout cancelled');
      assert.deepEqual(await h.provider.list(), [], 'teardown ran for every cancelled rollout');
    } finally {
      await h.stopWorkers();
    }
  });
});
