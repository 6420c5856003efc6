/**
 * Issue 19 §4 on the real llama.cpp server: healthy, made to generate to its limit (Qwen 0.5B asked for
 * 5,000 lines) past the call's timeout, the call is model/generation_too_long, and the abandoned
 * generation does not keep the server's only slot. The scripted cases are generationTooLong.test.ts;
 * this one alone holds the CPU-heavy slot of the test schedule. Skipped without the model.
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { OpenAIPolicy } from '../../policies/openaiPolicy.js';
import { loadTask } from '../../tasks/loadTask.js';
import { OpenAIPolicySchema } from '../../shared/pipeline.js';
import type { ChatMessage } from '../../shared/tools.js';
import { TOOL_SCHEMAS } from '../../shared/tools.js';
import { skipWithoutModel, startTestLlamaServer, TEST_MODEL_NAME } from '../helpers/llamaServer.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');

describe('a generation that outlasts its timeout', { timeout: 900_000 }, () => {
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
