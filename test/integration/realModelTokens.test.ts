/**
 * Exact tokens against a real inference server running a real model
 * (llama.cpp + Qwen2.5-Coder-0.5B, the real Temporal dev server, real
 * sandboxes): in token-level mode every turn has prompt and completion ids
 * and a logprob per generated token, the exported samples pass the integrity
 * check, and detokenizing input_ids (the server's /detokenize) reproduces the
 * conversation as rendered: the server's template of the instruction, the
 * text the model wrote each turn, and the template's text of each turn's tool
 * results. In server mode every turn has ids and logprobs too, and any prefix
 * break the server's re-rendering causes is recorded (printed, not asserted:
 * it depends on what the model writes). Skipped without ROLLOUT_MODEL_GGUF.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { groupSamples } from '../../client/export/exportBatch.js';
import { sampleProblems } from '../../client/export/trainingSample.js';
import { loadTrajectory } from '../../client/loadTrajectory.js';
import { submitBatch } from '../../client/submitBatch.js';
import type { GroupResult, PolicyConfig } from '../../shared/pipeline.js';
import type { TokenMode, TurnTokens } from '../../shared/tokens.js';
import { SYSTEM_PROMPT } from '../../agent/conversation.js';
import { TOOL_SCHEMAS, type ChatMessage } from '../../shared/tools.js';
import { wireMessages } from '../../policies/wireMessages.js';
import { ConfiguredTemplate } from '../../policies/tokens/chatTemplate/configuredTemplate.js';
import type { RunningLlamaServer } from '../../servers/inference/llamaServer.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { skipWithoutModel, startTestLlamaServer, TEST_MODEL_NAME } from '../helpers/llamaServer.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');
let h: Harness;
let llama: RunningLlamaServer;
let root: string;
let seq = 0;
const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

before(async () => {
  if (skipWithoutModel) return;
  h = await startHarness('real-model-tokens');
  llama = await startTestLlamaServer({ name: 'real-model-tokens', parallel: 2, ctx: 8192 });
  root = llama.baseUrl.replace(/\/v1$/, '');
  await h.startWorkers();
});

after(async () => {
  await h?.stopWorkers();
  await llama?.stop();
  await h?.close();
});

async function post<T>(path: string, body: unknown): Promise<T> {
  const response = await fetch(`${root}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(response.status, 200, `${path}: ${await response.clone().text()}`);
  return (await response.json()) as T;
}
const detokenize = async (ids: number[]): Promise<string> => (await post<{ content: string }>('/detokenize', { tokens: ids })).content;
const render = async (messages: ChatMessage[]): Promise<string> => (await post<{ prompt: string }>('/apply-template', { messages: wireMessages(messages), tools: TOOL_SCHEMAS })).prompt;

async function run(mode: TokenMode, chatTemplate?: string): Promise<GroupResult> {
  const policy: PolicyConfig = {
    kind: 'openai',
    baseUrl: llama.baseUrl,
    model: TEST_MODEL_NAME,
    sampling: { seed: 3, temperature: 0.7, max_tokens: 160 },
    requestTimeoutMs: 240_000,
    toolCallParser: ['server', 'fenced-json', 'hermes-tags', 'bare-json'],
    tokens: { mode, ...(chatTemplate ? { chatTemplate } : {}) },
  };
  const batch = await submitBatch(h.client, { batchId: `real-tok-${mode}${chatTemplate ? '-tmpl' : ''}-${Date.now()}-${seq++}`, taskQueues: h.taskQueues, tasks: [join(examples, 'write-greeting')], groupSize: 2, minValid: 1, policy, limits: { maxTurns: 3 } });
  for await (const group of batch.results()) return group;
  throw new Error('no group result');
}

describe('exact tokens on a real model', { timeout: 1_800_000 }, () => {
  test('token-level mode: ids and logprobs every turn, samples pass the integrity check, detokenized input_ids reproduce the rendered conversation', { skip: skipWithoutModel }, async () => {
    const group = await run('pipeline');
    const { samples, excluded } = await groupSamples(h.store, group);
    const valid = group.rollouts.filter((r) => r.valid);
    assert.ok(valid.length > 0, `no valid rollout: ${JSON.stringify(group.rollouts.map((r) => r.attemptHistory))}`);
    assert.deepEqual(excluded.filter((e) => e.why !== 'not_valid'), [], 'no valid rollout broke the prefix rule or lacks ids');
    assert.equal(samples.length, valid.length);
    for (const s of samples) {
      assert.deepEqual(sampleProblems(s), []);
      assert.equal(s.token_integrity.status, 'ok');
      const r = group.rollouts.find((x) => x.index === s.rollout_index);
      assert.ok(r);
      const attempt = (await loadTrajectory(h.store, r.trajectoryRef)).find((a) => a.attempt === s.token_integrity.attempt);
      assert.ok(attempt && attempt.turns.length > 0);
      let expected = await render([
        { role: 'system', content: SYSTEM_PROMPT },
        { role: 'user', content: attempt.meta.instruction },
      ]);
      const messages: ChatMessage[] = [];
      for (const [k, turn] of attempt.turns.entries()) {
        const t = turn.policy.turnTokens as TurnTokens;
        assert.ok(t && 'promptIds' in t, `turn ${k} has ids`);
        assert.equal(t.source, 'pipeline');
        // Rendered with the server's template: recorded as /props reports it (llama.cpp drops the file's trailing newline).
        assert.deepEqual(t.chatTemplate, { source: 'server', sha256: sha256(readFileSync(llama.template.file, 'utf8').trimEnd()) });
        assert.ok(t.completionIds.length > 0 && t.completionLogprobs.length === t.completionIds.length, `turn ${k}: a logprob per generated token`);
        assert.ok(t.completionLogprobs.every((lp) => Number.isFinite(lp) && lp <= 0));
        // What the model wrote, id for id: the text it generated, plus its end-of-turn token when it stopped on one.
        const completion = await detokenize(t.completionIds);
        const written = turn.policy.rawContent ?? '';
        assert.ok(completion.startsWith(written), `turn ${k}: completion ids detokenize to the text the model wrote`);
        assert.ok(completion === written || completion.slice(written.length) === (await detokenize(t.completionIds.slice(-1))), `turn ${k}: only the stop token follows`);
        expected += completion;
        messages.push(turn.policy.assistant, ...turn.tools.map((tool) => ({ role: 'tool' as const, tool_call_id: tool.toolCallId, content: tool.observation })));
        const next = attempt.turns[k + 1]?.policy.turnTokens as TurnTokens | undefined;
        if (!next) break;
        // The tokens between this completion and the next one are the server's own rendering of the tool results.
        const added = await detokenize(next.promptIds.slice(t.promptIds.length + t.completionIds.length));
        const rerendered = await render([{ role: 'system', content: SYSTEM_PROMPT }, { role: 'user', content: attempt.meta.instruction }, ...messages]);
        assert.ok(rerendered.endsWith(added), `turn ${k}: the added tokens are the template's text for the tool results:\n${JSON.stringify(added)}`);
        for (const tool of turn.tools) assert.ok(added.includes(tool.observation), `turn ${k}: the observation of ${tool.name} is in the prompt verbatim`);
        expected += added;
      }
      assert.equal(await detokenize(s.input_ids), expected, 'detokenized input_ids are the rendered conversation');
    }
    console.log(`real model, token-level: rewards ${JSON.stringify(group.rollouts.map((r) => r.reward))}, ${samples.map((s) => `${s.input_ids.length} ids / ${s.loss_mask.filter((m) => m === 1).length} generated`).join(', ')}`);
  });

  test('token-level mode with a configured chat template: prompts are rendered with it, its sha256 is in the experiment record and on every turn, samples pass', { skip: skipWithoutModel }, async () => {
    // The server's own template with a line of ours in the system turn: the prompts must carry it, the server's template does not.
    const marker = 'Configured-template marker: answer with one tool call per turn.';
    const served = readFileSync(llama.template.file, 'utf8');
    const text = served.replaceAll("{{- messages[0]['content'] }}", `{{- messages[0]['content'] }}\n${marker}`);
    assert.notEqual(text, served, "the served template renders the system message with {{- messages[0]['content'] }}");
    const file = join(mkdtempSync(join(tmpdir(), 'chat-template-')), 'qwen-marked.jinja');
    writeFileSync(file, text);
    const group = await run('pipeline', file);
    const digest = sha256(text);
    const { samples, excluded } = await groupSamples(h.store, group);
    const valid = group.rollouts.filter((r) => r.valid);
    assert.ok(valid.length > 0, `no valid rollout: ${JSON.stringify(group.rollouts.map((r) => r.attemptHistory))}`);
    assert.deepEqual(excluded.filter((e) => e.why !== 'not_valid'), []);
    assert.equal(samples.length, valid.length);
    for (const r of group.rollouts) {
      const recorded = r.experiment?.policy.kind === 'openai' ? r.experiment.policy.tokens.chatTemplate : undefined;
      assert.ok(recorded && typeof recorded !== 'string', 'the experiment record carries the template');
      assert.deepEqual([recorded.file, recorded.sha256], [file, digest]);
      for (const attempt of await loadTrajectory(h.store, r.trajectoryRef)) {
        for (const [k, turn] of attempt.turns.entries()) {
          const t = turn.policy.turnTokens as TurnTokens;
          assert.ok(t && 'promptIds' in t, `turn ${k} has ids`);
          assert.deepEqual(t.chatTemplate, { source: 'configured', sha256: digest, file }, `turn ${k} records the template`);
        }
        const first = attempt.turns[0]?.policy.turnTokens as TurnTokens | undefined;
        if (!first) continue;
        const prompt = await detokenize(first.promptIds);
        const instruction: ChatMessage[] = [{ role: 'system', content: SYSTEM_PROMPT }, { role: 'user', content: attempt.meta.instruction }];
        assert.ok(prompt.includes(marker), 'the prompt was rendered with the configured template');
        assert.ok(!(await render(instruction)).includes(marker), "the server's template does not have the marker");
        assert.equal(prompt, new ConfiguredTemplate(text).render(wireMessages(instruction), TOOL_SCHEMAS, { bosToken: '', eosToken: '<|im_end|>' }), 'the prompt ids are the configured template of system + instruction');
      }
    }
    for (const s of samples) assert.deepEqual(sampleProblems(s), []);
    console.log(`real model, configured template ${digest.slice(0, 12)}: rewards ${JSON.stringify(group.rollouts.map((r) => r.reward))}, ${samples.map((s) => `${s.input_ids.length} ids`).join(', ')}`);
  });

  test('server mode: every turn has ids and logprobs from the server; re-rendering breaks, if any, are recorded with turn and position', { skip: skipWithoutModel }, async () => {
    const group = await run('server');
    for (const r of group.rollouts) {
      const attempts = await loadTrajectory(h.store, r.trajectoryRef);
      for (const turn of attempts.flatMap((a) => a.turns)) {
        const t = turn.policy.turnTokens;
        assert.ok(t && 'promptIds' in t, `every turn has ids: ${JSON.stringify(t)}`);
        assert.equal(t.source, 'server-rendered');
        assert.equal(t.promptIds.length, turn.policy.usage?.prompt_tokens, 'the prompt ids are as many as the server counted');
        assert.equal(t.completionLogprobs.length, t.completionIds.length);
      }
      const integrity = r.tokenIntegrity;
      assert.ok(integrity && integrity.status !== 'missing', JSON.stringify(integrity));
      if (integrity.status === 'broken') assert.ok(integrity.turn !== undefined && integrity.turn > 0 && integrity.position !== undefined);
    }
    console.log(`real model, server mode: ${group.rollouts.map((r) => `${r.tokenIntegrity?.status}${r.tokenIntegrity?.turn !== undefined ? ` at turn ${r.tokenIntegrity.turn}, token ${r.tokenIntegrity.position}` : ''}`).join('; ')}`);
  });
});
