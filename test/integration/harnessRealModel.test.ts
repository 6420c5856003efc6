/**
 * The harness policy on the real model: mini-swe-agent and Harbor's terminus-2, unmodified, drive the
 * sample tasks' sandboxes while llama.cpp (Qwen2.5-Coder-0.5B) answers every captured call. Apart from
 * harnessPolicy.test.ts (the scripted endpoint) so that only this part holds the CPU-heavy slot of the
 * test schedule. Skipped without the harness venvs or the model.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { exportBatch } from '../../client/export/exportBatch.js';
import { sampleProblems, type TrainingSample } from '../../client/export/trainingSample.js';
import { loadTrajectory } from '../../client/loadTrajectory.js';
import type { SubmitBatchOptions } from '../../client/submitBatch.js';
import type { GroupResult } from '../../shared/pipeline.js';
import type { RunningLlamaServer } from '../../servers/inference/llamaServer.js';
import { runHarnessBatch, skipWithoutHarnessNamed as skipWithout } from '../helpers/harnessKit.js';
import { skipWithoutModel, startTestLlamaServer, TEST_MODEL_NAME } from '../helpers/llamaServer.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const examples = join(root, 'examples/tasks');
const skipWithoutHarness = skipWithout('mini-swe-agent');

let h: Harness;
let seq = 0;

before(async () => {
  if (skipWithoutHarness || skipWithoutModel) return;
  h = await startHarness('harness-real-model');
  await h.startWorkers();
});

after(async () => {
  await h?.close();
});

const run = (options: Omit<SubmitBatchOptions, 'batchId' | 'taskQueues'>): Promise<{ batchId: string; groups: GroupResult[] }> => runHarnessBatch(h, `harness-real-${Date.now()}-${seq++}`, options);

const readJsonl = (file: string): TrainingSample[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as TrainingSample);

describe('the harness policy: published harnesses drive the sandboxes, every model call captured', { timeout: 1_800_000, skip: skipWithoutHarness }, () => {
  describe('against the real model', { skip: skipWithoutModel }, () => {
    let llama: RunningLlamaServer;
    before(async () => {
      llama = await startTestLlamaServer({ name: 'harness-policy', parallel: 2, ctx: 16384 });
    });
    after(async () => {
      await llama?.stop();
    });

    test('both harnesses at once on the sample tasks: every call captured with ids, every rollout scored or classified, every sandbox torn down', { skip: skipWithout('terminus-2') }, async () => {
      const inference = { kind: 'openai' as const, baseUrl: llama.baseUrl, model: TEST_MODEL_NAME, sampling: { temperature: 0.7, seed: 1, max_tokens: 256 }, requestTimeoutMs: 240_000, toolCallParser: ['server' as const, 'fenced-json' as const, 'hermes-tags' as const, 'bare-json' as const] };
      const batches = await Promise.all([
        run({ tasks: [join(examples, 'write-greeting'), join(examples, 'fix-median')], groupSize: 1, minValid: 1, policy: { kind: 'harness', harness: 'mini-swe-agent', inference }, limits: { maxTurns: 3 } }),
        // fix-median's 300 s agent budget: terminus-2's first prompt waits behind mini-swe-agent's two on a 2-slot server.
        run({ tasks: [join(examples, 'fix-median')], groupSize: 1, minValid: 1, policy: { kind: 'harness', harness: 'terminus-2', inference }, limits: { maxTurns: 3 } }),
      ]);
      const seen: string[] = [];
      for (const [k, { batchId, groups }] of batches.entries()) {
        const harness = k === 0 ? 'mini-swe-agent' : 'terminus-2';
        let captured = 0;
        for (const g of groups)
          for (const r of g.rollouts) {
            const label = `${harness} ${r.workflowId}: ${r.outcomeClass}/${r.outcomeType} ${JSON.stringify(r.attemptHistory.map((a) => a.message))}`;
            assert.ok(r.outcomeClass === 'ok' || r.outcomeClass === 'model', `scored: ${label}`);
            assert.equal(typeof r.reward, 'number', label);
            const attempts = await loadTrajectory(h.store, r.trajectoryRef);
            const turns = attempts.at(-1)?.turns ?? [];
            // A rollout whose time ran out while its first call waited for the server has none (write-greeting: 120 s).
            assert.ok(turns.length <= 3 && (turns.length >= 1 || r.outcomeType === 'agent_timeout'), `1 to 3 captured calls: ${label}`);
            captured += turns.length;
            for (const t of turns) {
              assert.ok(t.policy.turnTokens && 'promptIds' in t.policy.turnTokens && t.policy.turnTokens.completionIds.length > 0, `ids on every call: ${label}`);
              assert.match(t.policy.model, /\.gguf$/, 'answered by llama.cpp');
              seen.push(`${harness} ${g.taskId} turn ${t.policy.turn}: ${t.tools.length} commands, ${t.policy.segmentStart ? 'new segment, ' : ''}answer ${JSON.stringify((t.policy.assistant.content ?? '').slice(0, 60))}`);
            }
            seen.push(`${harness} ${g.taskId}: ${r.outcomeType} reward ${r.reward}`);
          }
        assert.ok(captured >= 1, `${harness}: its calls reached the model and were captured`);
        const out = join(mkdtempSync(join(tmpdir(), 'harness-real-')), 'samples.jsonl');
        const report = await exportBatch(h.client, h.store, batchId, out);
        const samples = readJsonl(out);
        for (const sample of samples) assert.deepEqual(sampleProblems(sample), []);
        assert.equal(new Set([...samples.map((x) => x.rollout_id), ...report.excluded.map((x) => x.rollout_id)]).size, groups.length, `${harness}: every rollout exported or excluded with why`);
      }
      console.log(`harnesses on the real model:\n${seen.join('\n')}`);
      assert.deepEqual(await h.provider.list(), [], 'every sandbox was torn down');
    });
  });
});
