/**
 * The exact-prefix check and sample assembly: what a trainer relies on when it
 * trains on input_ids with a loss mask and aligned logprobs.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assembleTokens, sampleProblems } from '../../client/export/trainingSample.js';
import { checkPrefix, type TurnTokens } from '../../shared/tokens.js';
import { turnIntegrity } from '../../policies/tokens/turnIntegrity.js';
import { parseCompletionTokens } from '../../policies/tokens/completionTokens.js';

const turn = (promptIds: number[], completionIds: number[]): TurnTokens => ({ source: 'pipeline', promptIds, completionIds, completionLogprobs: completionIds.map((_, i) => -0.1 * (i + 1)) });

test('a prompt that extends the previous prompt + completion passes; one that re-renders a token is a break at that position', () => {
  const prev = { promptIds: [1, 2, 3], completionIds: [10, 11] };
  assert.deepEqual(checkPrefix(prev, [1, 2, 3, 10, 11, 5, 6]), { ok: true });
  const broken = checkPrefix(prev, [1, 2, 3, 10, 12, 5]);
  assert.equal(broken.ok, false);
  assert.ok(!broken.ok && broken.position === 4 && broken.expected === 11 && broken.actual === 12);
  const short = checkPrefix(prev, [1, 2, 3]);
  assert.ok(!short.ok && short.position === 3 && short.actual === null, 'a prompt shorter than what came before is a break too');
});

test('turn integrity: ok, missing ids and a break are told apart, with the break position', () => {
  const t0 = turn([1, 2], [3]);
  assert.equal(turnIntegrity(t0, undefined, true).status.status, 'ok');
  assert.equal(turnIntegrity(turn([1, 2, 3, 4], [5]), t0, false).status.status, 'ok');
  const broken = turnIntegrity(turn([1, 9, 3, 4], [5]), t0, false);
  assert.deepEqual([broken.status.status, broken.status.position], ['broken', 1]);
  assert.equal(turnIntegrity({ reason: 'no ids from this server' }, t0, false).status.reason, 'no ids from this server');
  assert.equal(turnIntegrity(turn([1], [2]), { reason: 'none' }, false).status.status, 'missing');
});

test('a sample is the last prompt + completion; the mask is 1 exactly on generated tokens and logprobs line up', () => {
  const turns = [turn([1, 2, 3], [10, 11]), turn([1, 2, 3, 10, 11, 4, 5], [12]), turn([1, 2, 3, 10, 11, 4, 5, 12, 6], [13, 14, 15])];
  const s = assembleTokens(turns);
  assert.deepEqual(s.input_ids, [1, 2, 3, 10, 11, 4, 5, 12, 6, 13, 14, 15]);
  assert.deepEqual(s.loss_mask, [0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1]);
  assert.deepEqual(s.logprobs, [null, null, null, -0.1, -0.2, null, null, -0.1, null, -0.1, -0.2, -0.30000000000000004]);
  assert.deepEqual(s.completion_spans, [[3, 5], [7, 8], [9, 12]]);
  assert.deepEqual(sampleProblems(s), []);
});

test('a turn whose completion is not where the prefix rule puts it stays unmasked and is named, never patched', () => {
  const s = assembleTokens([turn([1, 2], [10, 11]), turn([1, 2, 10, 99, 4], [12])]);
  assert.deepEqual(s.input_ids, [1, 2, 10, 99, 4, 12]);
  assert.deepEqual(s.unmasked_turns, [0]);
  assert.deepEqual(s.loss_mask, [0, 0, 0, 0, 0, 1]);
  assert.deepEqual(sampleProblems(s), []);
});

test('sampleProblems finds misaligned arrays and a mask without logprobs', () => {
  const problems = sampleProblems({ input_ids: [1, 2, 3], loss_mask: [0, 1, 1], logprobs: [null, -0.5], completion_spans: [[1, 3]] });
  assert.ok(problems.some((p) => /logprobs has 2 entries for 3/.test(p)));
  assert.ok(problems.some((p) => /position 2: loss_mask 1 but logprob undefined/.test(p)));
});

test('completion ids and logprobs are read from llama.cpp logprob ids and from vLLM token_ids; their absence is explained', () => {
  const llama = parseCompletionTokens({ logprobs: { content: [{ id: 5, token: 'a', logprob: -1 }, { id: 151645, token: '', logprob: -0.5 }] } }, 0);
  assert.deepEqual(llama, { ids: [5, 151645], logprobs: [-1, -0.5] });
  const vllm = parseCompletionTokens({ token_ids: [7, 8], logprobs: { token_logprobs: [-0.2, -0.3] } }, 0);
  assert.deepEqual(vllm, { ids: [7, 8], logprobs: [-0.2, -0.3] });
  const none = parseCompletionTokens({ logprobs: { content: [{ token: 'a', logprob: -1 }] } }, 0);
  assert.ok('missing' in none && /return_token_ids/.test(none.missing));
});
