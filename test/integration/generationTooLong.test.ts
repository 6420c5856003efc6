/**
 * Issue 19 §4, a generation that runs long is the model's: a policy call that
 * outlasts its time while the server answers its health probe ends the agent
 * loop as model/generation_too_long (verified, scored, asked once, never
 * retried); a server that answers nothing is infra/policy_unavailable, waited
 * out and never shown to the model. Against the scripted endpoint as a fault
 * injector at the edge, and against the real llama.cpp server with a prompt
 * that makes Qwen 0.5B generate to its limit. Real dev server, real sandboxes.
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { SubmitBatchOptions } from '../../client/submitBatch.js';
import type { GroupResult } from '../../shared/pipeline.js';
import type { ChatMessage } from '../../shared/tools.js';
import { OpenAIPolicy } from '../../activities/policies/openaiPolicy.js';
import { loadTask } from '../../activities/tasks/loadTask.js';
import { TOOL_SCHEMAS } from '../../shared/tools.js';
import { OpenAIPolicySchema } from '../../shared/pipeline.js';
import { runOneGroup, startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { skipWithoutModel, startTestLlamaServer, TEST_MODEL_NAME } from '../helpers/llamaServer.js';
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

  test('the real llama.cpp server, healthy, generating to its limit past the timeout: generation_too_long, and the server stops generating', { skip: skipWithoutModel, timeout: 300_000 }, async () => {
    const llama = await startTestLlamaServer({ name: 'gen-too-long', parallel: 1, ctx: 4096 });
    try {
      const policy = new OpenAIPolicy(OpenAIPolicySchema.parse({ kind: 'openai', baseUrl: llama.baseUrl, model: TEST_MODEL_NAME, sampling: { seed: 3, temperature: 0, max_tokens: 2000 }, requestTimeoutMs: 4_000 }));
      const messages: ChatMessage[] = [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'Write the numbers from 1 to 5000, one per line, in plain text. Do not use any tool and do not stop early.' },
      ];
      const task = loadTask(join(examples, 'write-greeting'));
      await assert.rejects(policy.next({ messages, tools: TOOL_SCHEMAS, task, rolloutIndex: 0, attempt: 0, turn: 0 }), (err: Error & { type?: string; nonRetryable?: boolean }) => {
        assert.equal(err.type, 'model/generation_too_long', err.message);
        assert.equal(err.nonRetryable, true);
        assert.match(err.message, /while the server was healthy \(GET http:\/\/127\.0\.0\.1:\d+\/v1\/models answered 200\)/);
        return true;
      });
      // The abandoned generation (2,000 tokens, over a minute at 25 tok/s) does not keep the only slot.
      const short = new OpenAIPolicy(OpenAIPolicySchema.parse({ kind: 'openai', baseUrl: llama.baseUrl, model: TEST_MODEL_NAME, sampling: { seed: 3, temperature: 0, max_tokens: 8 }, requestTimeoutMs: 30_000 }));
      const quick = await short.next({ messages: [{ role: 'user', content: 'Say OK.' }], tools: [], task, rolloutIndex: 0, attempt: 0, turn: 1 }).catch((err: Error) => err);
      assert.ok(!(quick instanceof Error), `the server was still busy with the abandoned generation: ${quick instanceof Error ? quick.message : ''}`);
      assert.equal(await llama.stop(), 'exit code 0', 'SIGTERM stops the launcher by itself, no SIGKILL needed');
    } finally {
      await llama.stop();
    }
  });
});
