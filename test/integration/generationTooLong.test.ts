/**
 * Issue 19 §4, a generation that runs long is the model's: a policy call that
 * outlasts its time while the server answers its health probe ends the agent
 * loop as model/generation_too_long (verified, scored, asked once, never
 * retried); a server that answers nothing is infra/policy_unavailable, waited
 * out and never shown to the model. Against the scripted endpoint as a fault
 * injector at the edge (the real llama.cpp server, made to generate to its
 * limit: generationTooLongRealModel.test.ts). Real dev server, real sandboxes.
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { SubmitBatchOptions } from '../../client/submitBatch.js';
import type { GroupResult } from '../../shared/pipeline.js';
import { runOneGroup, startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { startScriptedOpenAIServer } from '../helpers/scriptedOpenAIServer.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');
let h: Harness;

before(async () => {
  h = await startHarness('gen-too-long');
});

after(async () => {
  await h.close();
});

const runOne = (options: Omit<SubmitBatchOptions, 'batchId' | 'taskQueues'>): Promise<GroupResult> => runOneGroup(h, 'gtl', options);

/** Attempts of every policyStep activity in the rollout's history, and the failure type before each retry. */
async function policyTries(workflowId: string): Promise<{ attempts: number[]; retriedAfter: string[] }> {
  const history = await h.client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const policySchedules = new Set(events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'policyStep').map((e) => String(e.eventId)));
  const started = events.map((e) => e.activityTaskStartedEventAttributes).filter((a) => a && policySchedules.has(String(a.scheduledEventId)));
  return {
    attempts: started.map((a) => a?.attempt ?? 0),
    retriedAfter: started.map((a) => a?.lastFailure?.applicationFailureInfo?.type ?? '').filter((t) => t !== ''),
  };
}

describe('a generation that outlasts its timeout', { timeout: 900_000 }, () => {
  test('the server answers its probe but the completion never finishes: model/generation_too_long, scored, asked once', async () => {
    const server = await startScriptedOpenAIServer(() => ({ content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] }));
    server.misbehaveNext('hang');
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
      assert.deepEqual([r.outcomeClass, r.outcomeType, r.valid, r.reward, r.attempts, r.turns], ['model', 'generation_too_long', true, 0, 1, 0], 'the untouched start is verified and scored 0');
      assert.match(r.attemptHistory[0]?.message ?? '', /still generating after 2 s \(requestTimeoutMs; max_tokens 1024\) while the server was healthy \(GET http:\/\/127\.0\.0\.1:\d+\/v1\/models answered 200\)/);
      assert.equal(server.requests.length, 1, 'the model is not asked to regenerate the same turn');
      assert.equal(server.requests[0]?.max_tokens, 1024, 'the default max_tokens per turn is sent');
      assert.ok(server.probes() >= 1);
      assert.deepEqual((await policyTries(r.workflowId)).attempts, [1], 'the policy activity ran once');
    } finally {
      await h.stopWorkers();
      await server.close();
    }
  });

  test('a server that answers nothing, probe included, is infra/policy_unavailable: waited out, then the rollout goes on', async () => {
    const server = await startScriptedOpenAIServer((_req, turn) =>
      turn === 0
        ? { content: null, toolCalls: [{ name: 'bash', arguments: { command: "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt" } }] }
        : { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] },
    );
    server.misbehaveNext('unresponsive');
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
      assert.deepEqual([r.outcomeClass, r.outcomeType, r.reward, r.attempts, r.turns], ['ok', 'submitted', 1, 1, 2]);
      const tries = await policyTries(r.workflowId);
      assert.ok(tries.attempts.some((a) => a > 1), 'the first policy call was retried');
      assert.ok(tries.retriedAfter.every((t) => t === 'infra/policy_unavailable'), `retried after ${tries.retriedAfter.join(', ')}`);
      assert.equal(server.probes(), 0, 'no probe was answered while the server was silent');
      assert.doesNotMatch(JSON.stringify(server.requests.at(-1)?.messages), /timeout|probe|unavailable|did not answer/i, 'the outage never reached the conversation');
    } finally {
      await h.stopWorkers();
      await server.close();
    }
  });
});
