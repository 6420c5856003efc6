/** The per-turn token budget and the request timeout derived from it (issue 19 §4). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_DERIVED_TIMEOUT_MS, turnBudget } from '../../policies/generationBudget/turnBudget.js';
import { OpenAIPolicySchema } from '../../shared/pipeline.js';

const config = (extra: Record<string, unknown> = {}) => OpenAIPolicySchema.parse({ kind: 'openai', baseUrl: 'http://127.0.0.1:8000/v1', model: 'm', ...extra });

test('without settings a turn gets 1024 tokens and a timeout derived from them', () => {
  assert.deepEqual(turnBudget(config()), { maxTokens: 1024, timeoutMs: Math.min(MAX_DERIVED_TIMEOUT_MS, 30_000 + 1024 * 250), timeoutSource: 'derived from max_tokens' });
  assert.deepEqual(turnBudget(config({ sampling: { max_tokens: 200 } })), { maxTokens: 200, timeoutMs: 80_000, timeoutSource: 'derived from max_tokens' });
});

test('the derived timeout stays inside the policy activity timeout; a timeout the user set is kept', () => {
  assert.equal(turnBudget(config({ sampling: { max_tokens: 8192 } })).timeoutMs, MAX_DERIVED_TIMEOUT_MS);
  assert.ok(MAX_DERIVED_TIMEOUT_MS < 300_000, 'below the 5-minute start-to-close of policyStep');
  assert.deepEqual(turnBudget(config({ requestTimeoutMs: 5_000 })), { maxTokens: 1024, timeoutMs: 5_000, timeoutSource: 'requestTimeoutMs' });
});

test('a request timeout past the activity limit is refused, naming the fix', () => {
  const parsed = OpenAIPolicySchema.safeParse({ kind: 'openai', baseUrl: 'http://127.0.0.1:8000/v1', model: 'm', requestTimeoutMs: 600_000 });
  assert.equal(parsed.success, false);
  assert.match(parsed.error?.issues[0]?.message ?? '', /at most 280000 ms: a policy call runs inside an activity limited to 5 minutes; lower sampling.max_tokens/);
});

test('a rollout started before max_tokens had a default still gets one', () => {
  assert.equal(turnBudget({ sampling: {} }).maxTokens, 1024);
});
