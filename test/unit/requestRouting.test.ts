/** What each policy call tells the server about its rollout and policy version (policies/routing/). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { requestRouting, SESSION_HEADER } from '../../policies/routing/requestRouting.js';

test('every server kind gets the rollout as its session key header', () => {
  for (const kind of ['llama.cpp', 'vllm', 'sglang', 'openai'] as const) {
    const r = requestRouting(kind, 'b1/fix-median/3', 2);
    assert.deepEqual(r.headers, { [SESSION_HEADER]: 'b1/fix-median/3' }, kind);
    assert.equal(r.routing.sessionKey, 'b1/fix-median/3');
  }
});

test('vLLM gets a prefix-cache salt per policy version; servers without the field get none, and the turn says why', () => {
  const v3 = requestRouting('vllm', 'b1/t/0', 3);
  assert.deepEqual(v3.body, { cache_salt: 'policy-v3' });
  assert.notDeepEqual(requestRouting('vllm', 'b1/t/0', 4).body, v3.body, 'a new version never shares the old cache');
  for (const kind of ['llama.cpp', 'sglang', 'openai'] as const) {
    const r = requestRouting(kind, 'b1/t/0', 3);
    assert.deepEqual([r.body, r.routing.cacheSalt], [{}, null], kind);
    assert.match(r.routing.cacheSaltNote, /^not sent: /);
  }
});
