/**
 * Issue 24 §1: the logprob a turn records is the log probability of the token
 * under the distribution that sampled it. Against the real llama.cpp server and
 * Qwen2.5-Coder-0.5B: for every generated token, the raw distribution at that
 * position is asked for independently (the prompt plus the tokens before it,
 * the top 200 raw probabilities), the server's sampler chain is applied to it
 * here as llama.cpp orders it (top_k, top_p, min_p on the raw logits, then
 * temperature, renormalised over what is left), and the recorded logprob must
 * equal the log of the sampled token's probability there. The same tokens'
 * raw logprobs must not (or the check would prove nothing).
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { OpenAIPolicy } from '../../policies/openaiPolicy.js';
import type { PolicyResponse } from '../../policies/policyClient.js';
import { TokenLevelPolicy } from '../../policies/tokens/tokenLevelPolicy.js';
import { loadTask } from '../../tasks/loadTask.js';
import { OpenAIPolicySchema } from '../../shared/pipeline.js';
import type { TurnTokens } from '../../shared/tokens.js';
import type { ChatMessage } from '../../shared/tools.js';
import type { RunningLlamaServer } from '../../servers/inference/llamaServer.js';
import { skipWithoutModel, startTestLlamaServer, TEST_MODEL_NAME } from '../helpers/llamaServer.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');
const task = loadTask(join(examples, 'write-greeting'));
const messages: ChatMessage[] = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Write one short sentence about the sea.' },
];
let llama: RunningLlamaServer;

before(async () => {
  if (skipWithoutModel) return;
  llama = await startTestLlamaServer({ name: 'sampling-logprobs', parallel: 1, ctx: 4096 });
});

after(async () => {
  await llama?.stop();
});

interface Shaping {
  temperature: number;
  top_k: number;
  top_p: number;
  min_p: number;
}

/** The raw top-n (id, logprob) at the position after `prompt`, from the server's own /completion (no sampling involved). */
async function rawTop(prompt: number[], n: number): Promise<Map<number, number>> {
  const res = await fetch(`${llama.baseUrl.replace(/\/v1$/, '')}/completion`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, n_predict: 1, n_probs: n, post_sampling_probs: false, temperature: 1, top_k: 0, top_p: 1, min_p: 0, seed: 1 }),
  });
  const body = (await res.json()) as { completion_probabilities: { top_logprobs: { id: number; logprob: number }[] }[] };
  return new Map((body.completion_probabilities[0]?.top_logprobs ?? []).map((t) => [t.id, t.logprob]));
}

/** llama.cpp's chain on raw logprobs: top_k, top_p (softmax over the kept, cumulative >= p), min_p (relative to the best), temperature, renormalise. */
function sampledDistribution(raw: Map<number, number>, s: Shaping): Map<number, number> {
  let kept = [...raw.entries()].sort((a, b) => b[1] - a[1]);
  if (s.top_k > 0) kept = kept.slice(0, s.top_k);
  if (s.top_p < 1) {
    const z = kept.reduce((sum, [, lp]) => sum + Math.exp(lp), 0);
    let cum = 0;
    let last = kept.length;
    for (let i = 0; i < kept.length; i++) {
      cum += Math.exp((kept[i] as [number, number])[1]) / z;
      if (cum >= s.top_p) {
        last = i + 1;
        break;
      }
    }
    kept = kept.slice(0, last);
  }
  if (s.min_p > 0) {
    const best = (kept[0] as [number, number])[1];
    kept = kept.filter(([, lp]) => lp >= best + Math.log(s.min_p));
  }
  const scaled = kept.map(([id, lp]): [number, number] => [id, lp / s.temperature]);
  const max = Math.max(...scaled.map(([, l]) => l));
  const logZ = max + Math.log(scaled.reduce((sum, [, l]) => sum + Math.exp(l - max), 0));
  return new Map(scaled.map(([id, l]) => [id, l - logZ]));
}

async function generate(sampling: Record<string, number>, mode: 'server' | 'pipeline'): Promise<{ response: PolicyResponse; tokens: TurnTokens }> {
  const config = OpenAIPolicySchema.parse({ kind: 'openai', baseUrl: llama.baseUrl, model: TEST_MODEL_NAME, sampling: { max_tokens: 24, ...sampling }, tokens: { mode }, requestTimeoutMs: 120_000 });
  const policy = mode === 'pipeline' ? new TokenLevelPolicy(config) : new OpenAIPolicy(config);
  const response = await policy.next({ messages, tools: [], task, rolloutIndex: 0, attempt: 0, turn: 0 });
  const tokens = response.turnTokens;
  assert.ok(tokens && 'promptIds' in tokens, `the turn has ids: ${JSON.stringify(tokens)}`);
  return { response, tokens };
}

describe('logprobs of the distribution that sampled the tokens (real llama.cpp)', { skip: skipWithoutModel, timeout: 600_000 }, () => {
  for (const mode of ['pipeline', 'server'] as const) {
    test(`${mode} mode, llama.cpp's own default shaping set explicitly: every recorded logprob is the sampled distribution's, not the raw model's`, async () => {
      const shaping: Shaping = { temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05 };
      const { tokens } = await generate({ ...shaping, seed: 11 }, mode);
      assert.ok(tokens.sampling, 'the turn records how it was sampled');
      assert.equal(tokens.sampling.server, 'llama.cpp', 'auto found llama.cpp');
      assert.equal(tokens.sampling.paramsFrom, 'server', 'the parameters are what the server reports it used');
      assert.deepEqual({ t: tokens.sampling.params.temperature, k: tokens.sampling.params.top_k, p: tokens.sampling.params.top_p, m: tokens.sampling.params.min_p }, { t: 0.8, k: 40, p: 0.95, m: 0.05 });
      assert.equal(tokens.sampling.logprobs, 'post-sampling');
      assert.equal(tokens.sampling.mismatch, undefined, tokens.sampling.mismatch);
      let rawDiffers = 0;
      let sumGap = 0;
      for (let i = 0; i < tokens.completionIds.length; i++) {
        const id = tokens.completionIds[i] as number;
        const raw = await rawTop([...tokens.promptIds, ...tokens.completionIds.slice(0, i)], 200);
        const sampled = sampledDistribution(raw, shaping);
        const expected = sampled.get(id);
        assert.ok(expected !== undefined, `token ${i} (${id}) is in the distribution the chain leaves`);
        const recorded = tokens.completionLogprobs[i] as number;
        assert.ok(Math.abs(recorded - expected) < 2e-3, `token ${i} (${id}): recorded ${recorded}, the sampled distribution's ${expected}`);
        const rawLp = raw.get(id) as number;
        sumGap += Math.abs(rawLp - expected);
        if (Math.abs(rawLp - expected) > 0.05) rawDiffers++;
      }
      const n = tokens.completionIds.length;
      process.stdout.write(`${mode}: ${n} tokens; raw logprobs differ from the sampled distribution's by ${(sumGap / n).toFixed(3)} nats a token on average, by more than 0.05 on ${rawDiffers}\n`);
      assert.ok(rawDiffers > 0, 'the raw logprobs differ from the sampled ones on some token (the check has teeth)');
    });
  }

  test('unset sampling is sent as RL needs it (temperature 1, no truncation): raw logprobs are then the sampling distribution, and recorded as such', async () => {
    const { tokens } = await generate({ seed: 5 }, 'pipeline');
    const s = tokens.sampling;
    assert.ok(s);
    assert.deepEqual(s.params, { temperature: 1, top_p: 1, top_k: 0, min_p: 0, presence_penalty: 0, frequency_penalty: 0, repetition_penalty: 1 }, 'not the server defaults (0.8, 0.95, 40, 0.05)');
    assert.equal(s.logprobs, 'raw');
    assert.equal(s.mismatch, undefined);
    let compared = 0;
    for (let i = 0; i < tokens.completionIds.length; i++) {
      const raw = await rawTop([...tokens.promptIds, ...tokens.completionIds.slice(0, i)], 200);
      const expected = raw.get(tokens.completionIds[i] as number);
      if (expected === undefined) continue; // sampled from outside the top 200: nothing to compare
      compared++;
      assert.ok(Math.abs((tokens.completionLogprobs[i] as number) - expected) < 2e-3, `token ${i}`);
    }
    assert.ok(compared >= tokens.completionIds.length / 2, `most tokens compared (${compared} of ${tokens.completionIds.length})`);
  });

  test('greedy sampling (temperature 0) is flagged on the turn: a point mass is not a distribution to train against', async () => {
    const { tokens } = await generate({ temperature: 0, seed: 1 }, 'pipeline');
    assert.match(tokens.sampling?.mismatch ?? '', /temperature 0 samples greedily/);
  });
});
