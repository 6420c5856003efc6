/**
 * The train-inference mismatch on the real model (issue 24 §2): a batch sampled by llama.cpp serving
 * the Qwen2.5-Coder-0.5B GGUF (token-level mode, the RL default temperature 1, no truncation), exported,
 * and the trainer's own log probabilities of the same tokens computed by transformers from the same
 * GGUF (python/trainer, rollout_trainer.mismatch). What a trainer checks before it trusts the server's
 * logprobs as the old policy's: every generated token compared, the mismatch small (bounds measured
 * here and stated in docs/exact-tokens.md), and a distribution that is not the sampling one (the
 * tokens rescored at another temperature) far outside them. Then the loop closes: one GRPO step with a
 * LoRA, the adapter converted by llama.cpp's converter and the server restarted with it (weightSync),
 * and the server itself (scored token by token, serverLogprobs) gives the trained completions the
 * log probabilities the trainer computed after the step: up for a positive advantage, down for a
 * negative one. A sync with a file that is no adapter leaves the trained weights serving. Skipped
 * without the model, the trainer's venv or the converter (bash scripts/setup.sh train).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { exportBatch } from '../../client/export/exportBatch.js';
import { submitBatch } from '../../client/submitBatch.js';
import { serverLogprobs } from '../../client/training/serverLogprobs.js';
import { readTrainerLogprobs, runTrainerStep, type TrainerLogprobs, type TrainInferenceMismatch } from '../../client/training/trainerStep.js';
import { syncAdapter, WeightSyncError } from '../../client/training/weightSync.js';
import type { PolicyConfig } from '../../shared/pipeline.js';
import { startLlamaServer, type LlamaServerOptions, type RunningLlamaServer } from '../../servers/inference/llamaServer.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { skipWithoutModel, TEST_MODEL_NAME, testLlamaOptions } from '../helpers/llamaServer.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const trainPython = process.env.ROLLOUT_TRAIN_PYTHON;
const skip =
  skipWithoutModel ||
  (trainPython ? false : "needs the trainer's venv: bash scripts/setup.sh train prints ROLLOUT_TRAIN_PYTHON") ||
  (process.env.ROLLOUT_LORA_CONVERTER ? false : "needs llama.cpp's LoRA converter: bash scripts/setup.sh train prints ROLLOUT_LORA_CONVERTER");

let h: Harness;
let llama: RunningLlamaServer;
let llamaOptions: LlamaServerOptions;

before(async () => {
  if (skip) return;
  h = await startHarness('train-mismatch');
  llamaOptions = testLlamaOptions({ name: 'train-mismatch', parallel: 2, ctx: 8192 });
  llama = await startLlamaServer(llamaOptions);
  await h.startWorkers();
});

after(async () => {
  await h?.stopWorkers();
  await llama?.stop();
  await h?.close();
});

/** The server's log probabilities of each sample's generated tokens (the positions the trainer listed; the first `limit`), two samples at a time on the server's two slots. */
async function serverScores(baseUrl: string, samples: Map<string, number[]>, after: TrainerLogprobs[], limit?: number): Promise<Map<string, number[]>> {
  const scored = await Promise.all(after.map(async (a, i) => [a.rollout_id, await serverLogprobs(baseUrl, samples.get(a.rollout_id) as number[], a.positions.slice(0, limit), { slot: i % 2 })] as const));
  return new Map(scored);
}

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const meanAbsDelta = (a: number[], b: number[]): number => mean(a.map((x, i) => Math.abs(x - (b[i] as number))));

// Timeouts for a machine three times slower than a quiet one: the step took about 5 minutes beside
// other files one hour and ran past 15 (then the step's timeout) the hour before, on the same VM.
describe('the trainer against the inference server, on the real model', { timeout: 2_700_000 }, () => {
  test("the trainer's logprobs of the sampled tokens are the server's within the measured bounds (rescored at another temperature they are not), and one GRPO step moves each completion the way its advantage says", { skip }, async () => {
    const policy: PolicyConfig = {
      kind: 'openai',
      baseUrl: llama.baseUrl,
      model: TEST_MODEL_NAME,
      // No temperature set: the RL default (1, no truncation) is what the server samples with.
      sampling: { seed: 7, max_tokens: 160 },
      requestTimeoutMs: 240_000,
      toolCallParser: ['server', 'fenced-json', 'hermes-tags', 'bare-json'],
      tokens: { mode: 'pipeline' },
    };
    const batchId = `train-mismatch-${Date.now()}`;
    const batch = await submitBatch(h.client, { batchId, taskQueues: h.taskQueues, tasks: [join(root, 'examples/tasks/write-greeting')], groupSize: 2, minValid: 1, policy, limits: { maxTurns: 2 } });
    for await (const group of batch.results()) void group;
    const dir = mkdtempSync(join(tmpdir(), 'train-mismatch-'));
    try {
      const out = join(dir, 'samples.jsonl');
      const report = await exportBatch(h.client, h.store, batchId, out);
      assert.ok(report.exported > 1, `two samples to train on: ${JSON.stringify(report)}`);
      const exported = readFileSync(out, 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { rollout_id: string; input_ids: number[]; loss_mask: number[]; logprobs: (number | null)[]; advantage: number });
      const generated = exported.reduce((n, s) => n + s.loss_mask.filter((m) => m === 1).length, 0);
      // The step needs both signs; a group of two on this small model often earns one reward twice
      // (advantages 0). Then the test gives the first +1 and the second -1 (rewards 1 and 0, for TRL,
      // which computes advantages from the rewards), and says so.
      const bothSigns = exported.some((s) => s.advantage > 0) && exported.some((s) => s.advantage < 0);
      const stepSamples = bothSigns ? out : join(dir, 'signed.jsonl');
      if (!bothSigns) {
        console.log(`advantages ${JSON.stringify(exported.map((s) => s.advantage))}: the step trains on +1 / -1 instead`);
        writeFileSync(stepSamples, readFileSync(out, 'utf8').trim().split('\n').map((line, i) => JSON.stringify({ ...(JSON.parse(line) as object), advantage: i % 2 === 0 ? 1 : -1, reward: i % 2 === 0 ? 1 : 0 })).join('\n') + '\n');
      }

      const trained = join(dir, 'trained');
      const step = await runTrainerStep({ python: trainPython as string, samples: stepSamples, gguf: llamaOptions.model, out: trained, lr: 1e-3, alsoAt: [0.5], timeoutMs: 1_500_000 });
      const measured = step.mismatch;
      const rescored = step.mismatch_also_at[0] as TrainInferenceMismatch;
      console.log(`train-inference mismatch, ${measured.samples} samples, ${measured.tokens} generated tokens: mean k3 KL ${measured.mean_k3_kl.toExponential(2)}, mean |delta| ${measured.mean_abs_delta.toFixed(4)}, max |delta| ${measured.max_abs_delta.toFixed(4)}, mean delta ${measured.mean_delta.toFixed(4)}; rescored at temperature 0.5: mean |delta| ${rescored.mean_abs_delta.toFixed(4)}, mean k3 KL ${rescored.mean_k3_kl.toExponential(2)}`);
      assert.equal(measured.tokens, generated, 'every generated token compared');
      // Measured 2026-12-02 (306 tokens): mean k3 KL 3.5e-5, mean |delta| 0.0019, max |delta| 0.072; the
      // bounds leave 10-30x for other samples. Rescored at 0.5 the k3 KL was 400x the measured one.
      assert.ok(measured.mean_k3_kl < 1e-3, `mean k3 KL ${measured.mean_k3_kl}`);
      assert.ok(measured.mean_abs_delta < 0.02, `mean |delta logprob| ${measured.mean_abs_delta}`);
      assert.ok(measured.max_abs_delta < 0.5, `max |delta logprob| ${measured.max_abs_delta}`);
      assert.ok(rescored.mean_k3_kl > 20 * measured.mean_k3_kl, `a distribution that is not the sampling one is seen: k3 KL ${rescored.mean_k3_kl} rescored against ${measured.mean_k3_kl}`);

      // One step: the trainer's log probability of a positive-advantage completion rises, of a negative one falls.
      console.log(`one GRPO step (LoRA r 8, lr 1e-3, ${step.tokens} tokens): loss ${step.loss.toFixed(4)}; ${step.per_sample.map((p) => `advantage ${p.advantage.toFixed(2)} moved ${p.moved.toFixed(4)}`).join(', ')}`);
      assert.equal(step.tokens, generated);
      for (const p of step.per_sample) {
        if (p.advantage > 0) assert.ok(p.moved > 0, `${p.rollout_id}: advantage ${p.advantage}, mean logprob moved ${p.moved}`);
        if (p.advantage < 0) assert.ok(p.moved < 0, `${p.rollout_id}: advantage ${p.advantage}, mean logprob moved ${p.moved}`);
      }
      assert.ok(existsSync(join(trained, 'adapter_model.safetensors')), 'the LoRA adapter is saved');
      assert.ok(step.adapter_gguf && existsSync(step.adapter_gguf.path), `the adapter converted to GGUF: ${JSON.stringify(step.adapter_gguf)}`);

      // The scoring the sync check rests on reproduces what the server reported when it sampled (checked
      // on each completion's first 40 tokens: each costs a server call).
      const ids = new Map(exported.map((e) => [e.rollout_id, e.input_ids]));
      const after = readTrainerLogprobs(trained);
      const served = new Map(exported.map((e) => [e.rollout_id, e.loss_mask.flatMap((m, t) => (m === 1 ? [e.logprobs[t] as number] : []))]));
      const rescoredBefore = await serverScores(llama.baseUrl, ids, after, 40);
      const scoringDelta = mean([...rescoredBefore].map(([id, lps]) => meanAbsDelta(lps, (served.get(id) as number[]).slice(0, 40))));
      console.log(`the server rescoring its own sampled tokens: mean |delta| ${scoringDelta.toFixed(5)} against the logprobs it reported when sampling`);
      // Measured 2026-12-02: 0.0018 scored one sample at a time, 0.0033 two at once (the same weights; a
      // prefix evaluated as one batch instead of token by token, beside another sequence or not).
      assert.ok(scoringDelta < 0.01, `rescoring the sampled tokens on the unchanged server gives what it reported: mean |delta| ${scoringDelta}`);

      // The sync: the server restarted with the adapter serves the trained weights.
      const synced = await syncAdapter(llama, llamaOptions, step.adapter_gguf.path);
      llama = synced.server;
      assert.equal(llama.lora?.sha256, step.adapter_gguf.sha256, 'the server applies the adapter the trainer wrote');
      const afterSync = await serverScores(llama.baseUrl, ids, after);
      const postSync = mean(after.map((a) => meanAbsDelta(afterSync.get(a.rollout_id) as number[], a.logprobs)));
      // Against what the server reported when it sampled them: its logprobs before the step.
      const moves = step.per_sample.map((p) => ({ ...p, serverMoved: mean(afterSync.get(p.rollout_id) as number[]) - mean(served.get(p.rollout_id) as number[]) }));
      console.log(`after the sync (down ${(synced.downMs / 1000).toFixed(1)} s): the server against the trainer's post-step logprobs, mean |delta| ${postSync.toFixed(4)}; the server's mean logprob per completion: ${moves.map((m) => `advantage ${m.advantage.toFixed(2)} moved ${m.serverMoved.toFixed(4)}`).join(', ')}`);
      // Measured 2026-12-02: 0.0024 (before the step, trainer against server: 0.0019).
      assert.ok(postSync < 0.02, `the server serves what the trainer trained: mean |delta| ${postSync} (before the step: ${measured.mean_abs_delta})`);
      for (const m of moves) {
        if (m.advantage > 0) assert.ok(m.serverMoved > 0, `${m.rollout_id}: advantage ${m.advantage}, the server's mean logprob moved ${m.serverMoved}`);
        if (m.advantage < 0) assert.ok(m.serverMoved < 0, `${m.rollout_id}: advantage ${m.advantage}, the server's mean logprob moved ${m.serverMoved}`);
      }

      // A failed sync: a GGUF that is no adapter (the model itself). The server serves the trained weights again.
      const refused = await syncAdapter(llama, llamaOptions, llamaOptions.model).then(
        () => assert.fail('a model GGUF given as the adapter was accepted'),
        (err: unknown) => err,
      );
      assert.ok(refused instanceof WeightSyncError, String(refused));
      assert.ok(refused.message.includes(`refused adapter ${llamaOptions.model}`) && refused.message.includes('serves its previous weights again'), refused.message);
      llama = refused.server as RunningLlamaServer;
      assert.equal(llama.lora?.sha256, step.adapter_gguf.sha256, 'after the failed sync the server applies the adapter it had');
      // The trained weights, not the base ones: the first 60 tokens of each completion scored as the trainer has them after the step.
      const check = await serverScores(llama.baseUrl, ids, after, 60);
      const vsTrained = mean(after.map((a) => meanAbsDelta(check.get(a.rollout_id) as number[], a.logprobs.slice(0, 60))));
      const vsBase = mean(after.map((a) => meanAbsDelta(check.get(a.rollout_id) as number[], (served.get(a.rollout_id) as number[]).slice(0, 60))));
      console.log(`after the failed sync: mean |delta| ${vsTrained.toFixed(4)} against the trained weights, ${vsBase.toFixed(4)} against the weights before the step`);
      assert.ok(vsTrained < 0.02 && vsTrained < vsBase, `the trained weights serve again after the failed sync: mean |delta| ${vsTrained} against them, ${vsBase} against the base weights`);

      // A conversion that cannot be done says which adapter and why, and writes nothing.
      const broken = join(dir, 'not-an-adapter');
      const conv = spawnSync(trainPython as string, ['-m', 'rollout_trainer.adapter_gguf', '--adapter', broken, '--base-config', join(trained, 'base-config'), '--out', join(dir, 'x.gguf')], { encoding: 'utf8' });
      assert.equal(conv.status, 2, conv.stderr);
      assert.match(conv.stderr, /not-an-adapter is not a saved PEFT adapter: adapter_config.json is missing/);
      assert.ok(!existsSync(join(dir, 'x.gguf')));

      // TRL's own GRPOTrainer takes the same samples through its rollout_func hook and trains on them.
      const trl = spawnSync(trainPython as string, ['-m', 'rollout_trainer.trl_step', '--samples', stepSamples, '--gguf', llamaOptions.model, '--off-policy-mask-threshold', '0.5', '--out', join(dir, 'trl')], { encoding: 'utf8', timeout: 1_500_000 });
      assert.equal(trl.status, 0, trl.stderr.slice(-3000));
      const trlReport = JSON.parse(trl.stdout.trim().split('\n').at(-1) as string) as { rollout_func_calls: { completions: number }[]; logged: Record<string, number>; lora_tensors_moved: number; train_s: number };
      const rewards = readFileSync(stepSamples, 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as { reward: number }).reward);
      console.log(`TRL GRPOTrainer, one step on the CPU (${trlReport.train_s} s): loss ${trlReport.logged.loss}, reward ${trlReport.logged.reward}, ${trlReport.lora_tensors_moved} LoRA tensors moved`);
      assert.deepEqual(trlReport.rollout_func_calls.map((c) => c.completions), [exported.length], 'rollout_func returned the group, one completion per rollout');
      assert.ok(Math.abs((trlReport.logged.reward as number) - mean(rewards)) < 1e-6, `TRL saw the exported rewards: ${trlReport.logged.reward} against ${mean(rewards)}`);
      assert.ok(Number.isFinite(trlReport.logged.loss) && trlReport.lora_tensors_moved > 0, `TRL took a step: ${JSON.stringify(trlReport.logged)}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
