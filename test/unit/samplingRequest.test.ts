/**
 * What the policy sends per server kind, what it records a turn's logprobs
 * to be, and what the export does with a turn whose logprobs are not its
 * sampling distribution's (issue 24 §1). The response shapes are the ones the
 * project's llama.cpp sends (samplingLogprobs.test.ts checks them against it).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { samplingRequest } from '../../policies/sampling/samplingRequest.js';
import { turnSampling } from '../../policies/sampling/turnSampling.js';
import { parseCompletionTokens } from '../../policies/tokens/completionTokens.js';
import { assembleTokens } from '../../client/export/trainingSample.js';
import { OpenAIPolicySchema, SamplingSchema } from '../../shared/pipeline.js';
import type { TurnTokens } from '../../shared/tokens.js';

const at = { rolloutIndex: 1, attempt: 0, turn: 2 };
const sampling = (fields: Record<string, number> = {}) => SamplingSchema.parse(fields);

test('unset fields go out as RL needs them, in each kind’s names; never the server’s defaults', () => {
  const llama = samplingRequest('llama.cpp', sampling({ seed: 7 }), 'raw', 100, at);
  assert.deepEqual(llama.body, {
    max_tokens: 100,
    seed: 7 + 100_003 + 2,
    temperature: 1,
    top_p: 1,
    top_k: 0,
    min_p: 0,
    presence_penalty: 0,
    frequency_penalty: 0,
    repeat_penalty: 1,
    typical_p: 1,
    dry_multiplier: 0,
    xtc_probability: 0,
    mirostat: 0,
    top_n_sigma: -1,
    verbose: true,
  });
  assert.equal(llama.logprobs, 'raw', 'unshaped: the raw logprobs are the sampling distribution, no post-sampling list needed');
  const vllm = samplingRequest('vllm', sampling(), 'raw', 100, at);
  assert.deepEqual(vllm.body, { max_tokens: 100, temperature: 1, top_p: 1, top_k: -1, min_p: 0, presence_penalty: 0, frequency_penalty: 0, repetition_penalty: 1 });
  const openai = samplingRequest('openai', sampling(), 'raw', 100, at);
  assert.deepEqual(openai.body, { max_tokens: 100, temperature: 1, top_p: 1 }, 'a generic endpoint gets only what the OpenAI API has');
  assert.deepEqual(openai.sent, { temperature: 1, top_p: 1, top_k: null, min_p: null, presence_penalty: null, frequency_penalty: null, repetition_penalty: null });
});

test('what the user sets is sent as set; a shaped distribution asks llama.cpp for its post-sampling probabilities', () => {
  const shaped = samplingRequest('llama.cpp', sampling({ temperature: 0.7, top_k: 20, repetition_penalty: 1.1 }), 'raw', 50, at);
  assert.equal(shaped.body.temperature, 0.7);
  assert.equal(shaped.body.top_k, 20);
  assert.equal(shaped.body.repeat_penalty, 1.1);
  assert.equal(shaped.body.post_sampling_probs, true);
  assert.equal(shaped.logprobs, 'post-sampling');
  assert.equal(samplingRequest('vllm', sampling({ temperature: 0.7 }), 'processed', 50, at).logprobs, 'processed', 'as the operator declared the vLLM server returns them');
});

test('a field the server kind cannot take is an error naming it and the fix, at parse time when the kind is set and at call time when probed', () => {
  assert.throws(
    () => OpenAIPolicySchema.parse({ kind: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm', server: 'openai', sampling: { min_p: 0.1, top_k: 5 } }),
    /sampling\.top_k, sampling\.min_p cannot be sent to a server of kind openai, which takes temperature, top_p, presence_penalty, frequency_penalty\. Fix: remove them from policy\.sampling, or set policy\.server/,
  );
  assert.doesNotThrow(() => OpenAIPolicySchema.parse({ kind: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm', server: 'vllm', sampling: { min_p: 0.1, top_k: 5 } }));
  assert.throws(
    () => samplingRequest('openai', sampling({ repetition_penalty: 1.2 }), 'raw', 10, at),
    (err: Error & { type?: string; nonRetryable?: boolean }) => err.type === 'infra/policy_unavailable' && err.nonRetryable === true && /sampling\.repetition_penalty cannot be sent/.test(err.message),
  );
});

/** A llama.cpp answer with `verbose`: what its generation_settings say. */
const llamaAnswer = (settings: Record<string, unknown>, content = 'Hello.') => ({ __verbose: { content, generation_settings: { temperature: 0.800000011920929, top_k: 40, top_p: 0.949999988079071, min_p: 0.05000000074505806, presence_penalty: 0, frequency_penalty: 0, repeat_penalty: 1, typical_p: 1, mirostat: 0, xtc_probability: 0, dry_multiplier: 0, top_n_sigma: -1, post_sampling_probs: true, grammar: '', ...settings } } });

test('a turn records the parameters llama.cpp reports it used, and flags logprobs that cannot be its sampling distribution’s', () => {
  const asked = samplingRequest('llama.cpp', sampling({ temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05 }), 'raw', 10, at);
  const ok = turnSampling('llama.cpp', asked, llamaAnswer({}));
  assert.deepEqual(ok, { server: 'llama.cpp', params: { temperature: 0.8, top_p: 0.95, top_k: 40, min_p: 0.05, presence_penalty: 0, frequency_penalty: 0, repetition_penalty: 1 }, paramsFrom: 'server', logprobs: 'post-sampling' });
  const raw = turnSampling('llama.cpp', asked, llamaAnswer({ post_sampling_probs: false }));
  assert.equal(raw.logprobs, 'raw');
  assert.match(raw.mismatch ?? '', /the logprobs are the raw model's, but the server sampled with temperature 0\.8, top_p 0\.95, top_k 40, min_p 0\.05: this llama\.cpp did not return post-sampling probabilities/);
  const unseen = turnSampling('llama.cpp', samplingRequest('llama.cpp', sampling(), 'raw', 10, at), llamaAnswer({ temperature: 1, top_k: 0, top_p: 1, min_p: 0, post_sampling_probs: false, mirostat: 2 }));
  assert.match(unseen.mismatch ?? '', /sampled with mirostat 2/, 'a sampler the config has no field for still counts');
  const grammar = turnSampling('llama.cpp', asked, llamaAnswer({ grammar: 'root ::= ...', grammar_lazy: true, grammar_triggers: [{ type: 1, value: '```json\n' }] }, 'Sure.\n```json\n{"name": "bash"}\n```'));
  assert.match(grammar.mismatch ?? '', /tool-call grammar constrained the tokens after its trigger/);
  const untriggered = turnSampling('llama.cpp', asked, llamaAnswer({ grammar: 'root ::= ...', grammar_lazy: true, grammar_triggers: [{ type: 1, value: '```json\n' }] }, 'No tool needed.'));
  assert.equal(untriggered.mismatch, undefined, 'a lazy grammar that never fired constrained nothing');
  const greedy = turnSampling('llama.cpp', samplingRequest('llama.cpp', sampling({ temperature: 0 }), 'raw', 10, at), llamaAnswer({ temperature: 0 }));
  assert.match(greedy.mismatch ?? '', /temperature 0 samples greedily/);
  const silent = turnSampling('llama.cpp', asked, {});
  assert.deepEqual([silent.paramsFrom, silent.logprobs, silent.mismatch], ['request', 'post-sampling', undefined], 'an older llama.cpp that reports nothing: as asked');
});

test('vLLM and SGLang logprobs are raw unless declared processed: a shaped distribution is flagged with the fix', () => {
  const shaped = sampling({ temperature: 0.6, top_p: 0.9 });
  assert.match(turnSampling('vllm', samplingRequest('vllm', shaped, 'raw', 10, at), {}).mismatch ?? '', /raw model's, but the server sampled with temperature 0\.6, top_p 0\.9: start vLLM with --logprobs-mode processed_logprobs/);
  assert.equal(turnSampling('vllm', samplingRequest('vllm', shaped, 'processed', 10, at), {}).mismatch, undefined);
  assert.match(turnSampling('sglang', samplingRequest('sglang', shaped, 'raw', 10, at), {}).mismatch ?? '', /SGLang returns the raw model logprobs/);
  assert.equal(turnSampling('openai', samplingRequest('openai', sampling(), 'raw', 10, at), {}).mismatch, undefined);
});

test('llama.cpp post-sampling probabilities are read as their logarithms', () => {
  const parsed = parseCompletionTokens({ logprobs: { content: [{ id: 5, prob: 0.5, top_probs: [{ id: 5, prob: 0.5 }, { id: 6, prob: 0.25 }, { id: 7, prob: 0 }] }] } }, 3);
  assert.ok(!('missing' in parsed));
  assert.deepEqual(parsed.logprobs, [Math.log(0.5)]);
  assert.deepEqual(parsed.top, [[{ id: 5, logprob: Math.log(0.5) }, { id: 6, logprob: Math.log(0.25) }]], 'a probability of 0 (no logprob) is left out of the alternatives');
});

test('the sample carries each generated token’s temperature and the first turn whose logprobs are not its sampling distribution’s', () => {
  const params = { temperature: 0.7, top_p: 1, top_k: 0, min_p: 0, presence_penalty: 0, frequency_penalty: 0, repetition_penalty: 1 };
  const t0: TurnTokens = { source: 'pipeline', promptIds: [1, 2], completionIds: [3], completionLogprobs: [-0.5], sampling: { server: 'llama.cpp', params, paramsFrom: 'server', logprobs: 'post-sampling' } };
  const t1: TurnTokens = { source: 'pipeline', promptIds: [1, 2, 3, 4], completionIds: [5, 6], completionLogprobs: [-0.1, -0.2], sampling: { server: 'llama.cpp', params: { ...params, temperature: 0 }, paramsFrom: 'server', logprobs: 'post-sampling', mismatch: 'temperature 0 samples greedily' } };
  const s = assembleTokens([t0, t1]);
  assert.deepEqual(s.temperatures, [null, null, 0.7, null, 0, 0]);
  assert.equal(s.logprob_mismatch, 'turn 1: temperature 0 samples greedily');
  assert.equal(assembleTokens([t0]).logprob_mismatch, null);
  const old: TurnTokens = { ...t0 };
  delete old.sampling;
  assert.match(assembleTokens([old]).logprob_mismatch ?? '', /^turn 0: recorded before the pipeline kept how tokens were sampled/);
});
