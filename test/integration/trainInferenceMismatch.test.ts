/**
 * The train-inference mismatch on the real model (issue 24 §2): a batch sampled by llama.cpp serving
 * the Qwen2.5-Coder-0.5B GGUF (token-level mode, the RL default temperature 1, no truncation), exported,
 * and the trainer's own log probabilities of the same tokens computed by transformers from the same
 * GGUF (python/trainer, rollout_trainer.mismatch). What a trainer checks before it trusts the server's
 * logprobs as the old policy's: every generated token compared, the mismatch small (bounds measured
 * here and stated in docs/exact-tokens.md), and a distribution that is not the sampling one (the
 * tokens rescored at another temperature) far outside them. Skipped without the model or the trainer's
 * venv (bash scripts/setup.sh train).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { exportBatch } from '../../client/export/exportBatch.js';
import { submitBatch } from '../../client/submitBatch.js';
import type { PolicyConfig } from '../../shared/pipeline.js';
import type { RunningLlamaServer } from '../../workers/inference/llamaServer.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { skipWithoutModel, startTestLlamaServer, TEST_MODEL_NAME } from '../helpers/llamaServer.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const trainPython = process.env.ROLLOUT_TRAIN_PYTHON;
const skip = skipWithoutModel || (trainPython ? false : "needs the trainer's venv: bash scripts/setup.sh train prints ROLLOUT_TRAIN_PYTHON");

/** What rollout_trainer.mismatch prints. */
interface Mismatch {
  samples: number;
  tokens: number;
  mean_k3_kl: number;
  mean_abs_delta: number;
  max_abs_delta: number;
  mean_delta: number;
}

let h: Harness;
let llama: RunningLlamaServer;

before(async () => {
  if (skip) return;
  h = await startHarness('train-mismatch');
  llama = await startTestLlamaServer({ name: 'train-mismatch', parallel: 2, ctx: 8192 });
  await h.startWorkers();
});

after(async () => {
  await h?.stopWorkers();
  await llama?.stop();
  await h?.close();
});

/** The mismatch at the recorded temperatures, then with every token rescored at `otherTemperature` (one model load). */
function mismatch(samples: string, otherTemperature: number): [Mismatch, Mismatch] {
  const gguf = process.env.ROLLOUT_MODEL_GGUF as string;
  const py = spawnSync(trainPython as string, ['-m', 'rollout_trainer.mismatch', '--samples', samples, '--gguf', gguf, '--also-at', String(otherTemperature)], { encoding: 'utf8', timeout: 600_000 });
  assert.equal(py.status, 0, `rollout_trainer.mismatch: ${py.stderr.slice(-3000)}`);
  const [recorded, other] = py.stdout.trim().split('\n').map((line) => JSON.parse(line) as Mismatch);
  assert.ok(recorded && other, `two measurements: ${py.stdout}`);
  return [recorded, other];
}

describe('the trainer against the inference server, on the real model', { timeout: 1_800_000 }, () => {
  test("the trainer's logprobs of the sampled tokens are the server's within the measured bounds; rescored at another temperature they are not", { skip }, async () => {
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
    const out = join(mkdtempSync(join(tmpdir(), 'train-mismatch-')), 'samples.jsonl');
    const report = await exportBatch(h.client, h.store, batchId, out);
    assert.ok(report.exported > 0, `nothing exported: ${JSON.stringify(report)}`);
    const generated = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { loss_mask: number[]; temperatures: (number | null)[] }))
      .reduce((n, s) => n + s.loss_mask.filter((m) => m === 1).length, 0);

    const [measured, rescored] = mismatch(out, 0.5);
    console.log(`train-inference mismatch, ${measured.samples} samples, ${measured.tokens} generated tokens: mean k3 KL ${measured.mean_k3_kl.toExponential(2)}, mean |delta| ${measured.mean_abs_delta.toFixed(4)}, max |delta| ${measured.max_abs_delta.toFixed(4)}, mean delta ${measured.mean_delta.toFixed(4)}; rescored at temperature 0.5: mean |delta| ${rescored.mean_abs_delta.toFixed(4)}, mean k3 KL ${rescored.mean_k3_kl.toExponential(2)}`);
    assert.equal(measured.tokens, generated, 'every generated token compared');
    // Measured 2026-12-02 (306 tokens): mean k3 KL 3.5e-5, mean |delta| 0.0019, max |delta| 0.072; the
    // bounds leave 10-30x for other samples. Rescored at 0.5 the k3 KL was 400x the measured one.
    assert.ok(measured.mean_k3_kl < 1e-3, `mean k3 KL ${measured.mean_k3_kl}`);
    assert.ok(measured.mean_abs_delta < 0.02, `mean |delta logprob| ${measured.mean_abs_delta}`);
    assert.ok(measured.max_abs_delta < 0.5, `max |delta logprob| ${measured.max_abs_delta}`);
    assert.ok(rescored.mean_k3_kl > 20 * measured.mean_k3_kl, `a distribution that is not the sampling one is seen: k3 KL ${rescored.mean_k3_kl} rescored against ${measured.mean_k3_kl}`);
  });
});
