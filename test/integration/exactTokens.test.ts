/**
 * Exact tokens and policy versions end to end (real dev server, real
 * sandboxes, the openai policy against the scripted OpenAI-compatible server
 * as a fault injector at the edge): token ids captured per turn and exported
 * as samples that pass the integrity check; a server that re-renders a turn
 * differently is a prefix break, detected at capture time with its turn and
 * position, and the rollout is left out of the export; a policy version
 * advanced during a group with maxStaleness 0 restarts the rollouts or drops
 * the group, as configured; a version that goes backwards is refused.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { exportBatch, groupSamples } from '../../client/export/exportBatch.js';
import { sampleProblems, type TrainingSample } from '../../client/export/trainingSample.js';
import { advancePolicyVersion } from '../../client/policyVersion.js';
import { submitBatch, type SubmitBatchOptions } from '../../client/submitBatch.js';
import type { PolicyTurnRecord } from '../../agent/conversation.js';
import type { GroupResult } from '../../shared/pipeline.js';
import { groupWorkflowId } from '../../shared/names.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { startScriptedOpenAIServer, type Script } from '../helpers/scriptedOpenAIServer.js';
import { scriptedTokens } from '../helpers/scriptedTokens.js';
import { eventually } from '../helpers/eventually.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const examples = join(root, 'examples/tasks');
const task = join(examples, 'write-greeting');
let h: Harness;
let seq = 0;

/** Three turns: two commands, then submit. */
const threeTurns: Script = (_req, turn) =>
  turn === 0
    ? { content: 'Writing the file.', toolCalls: [{ name: 'bash', arguments: { command: "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt" } }] }
    : turn === 1
      ? { content: null, toolCalls: [{ name: 'bash', arguments: { command: 'cat /app/greeting.txt' } }] }
      : { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] };

before(async () => {
  h = await startHarness('exact-tokens');
  await h.startWorkers();
});

after(async () => {
  await h.close();
});

async function run(baseUrl: string, options: Partial<SubmitBatchOptions> = {}): Promise<{ batchId: string; group: GroupResult }> {
  const batchId = `tok-${Date.now()}-${seq++}`;
  const batch = await submitBatch(h.client, { batchId, taskQueues: h.taskQueues, tasks: [task], groupSize: 2, minValid: 1, policy: { kind: 'openai', baseUrl, model: 'scripted-model' }, ...options });
  for await (const group of batch.results()) return { batchId, group };
  throw new Error('no group result');
}

const readJsonl = (file: string): TrainingSample[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as TrainingSample);

describe('exact tokens and policy versions', { timeout: 900_000 }, () => {
  test('`rollout export --help` documents every field a sample has', () => {
    const help = spawnSync(process.execPath, [join(root, 'client/bin/rollout.js'), 'export', '--help'], { encoding: 'utf8' });
    assert.equal(help.status, 0, help.stderr);
    const fields: (keyof TrainingSample)[] = ['rollout_id', 'group_id', 'batch_id', 'task_id', 'task_version', 'rollout_index', 'input_ids', 'loss_mask', 'logprobs', 'completion_spans', 'reward', 'advantage', 'policy_versions', 'staleness', 'stale', 'outcome', 'token_integrity'];
    for (const field of fields) assert.match(help.stdout, new RegExp(`\\b${field}\\b`), field);
    assert.match(help.stdout, /--keep-broken/);
  });

  test('every turn keeps its ids; the export has one sample per rollout that passes the integrity check', async () => {
    const ids = scriptedTokens();
    const server = await startScriptedOpenAIServer(threeTurns, { tokens: ids.tokens });
    try {
      const { batchId, group } = await run(server.baseUrl);
      assert.equal(group.status, 'complete');
      assert.ok(server.requests.every((r) => (r as unknown as { return_token_ids?: boolean }).return_token_ids === true && r.logprobs === true), 'token ids and logprobs are asked for');
      for (const r of group.rollouts) {
        assert.equal(r.reward, 1);
        assert.deepEqual(r.tokenIntegrity, { status: 'ok', attempt: 0, turns: 3 });
        assert.deepEqual(r.policyVersions, [0, 0, 0]);
        const turn1 = await h.store.get<PolicyTurnRecord>(r.trajectoryRef, 'attempt-00/turn-0001.policy.json');
        assert.ok(turn1?.turnTokens && 'promptIds' in turn1.turnTokens && turn1.turnTokens.source === 'server');
        assert.equal(turn1.tokens, undefined, 'the ids and logprobs are stored once, in turnTokens, not also as the raw server fields');
        assert.deepEqual(turn1.prefixCheck, { ok: true });
        assert.equal(turn1.policyVersion, 0);
      }
      const out = join(mkdtempSync(join(tmpdir(), 'export-')), 'samples.jsonl');
      const report = await exportBatch(h.client, h.store, batchId, out);
      assert.equal(report.exported, 2);
      assert.deepEqual(report.excluded, []);
      const samples = readJsonl(out);
      for (const s of samples) {
        assert.deepEqual(sampleProblems(s), []);
        assert.equal(s.token_integrity.status, 'ok');
        assert.equal(s.completion_spans.length, 3);
        // The scripted endpoint is a generic OpenAI one: sent temperature 1 and top_p 1, its logprobs are those it sampled from.
        assert.equal(s.logprob_mismatch, null);
        assert.ok(s.temperatures.every((t, i) => (s.loss_mask[i] === 1 ? t === 1 : t === null)), 'temperature 1 on every generated token, null elsewhere');
        assert.equal(s.task_version, group.taskVersion);
        assert.equal(s.group_id, groupWorkflowId(batchId, 'write-greeting'));
        assert.ok(s.advantage !== null && s.reward === 1);
        // The last request's prompt plus its answer is the whole sequence; the mask covers the three answers.
        const last = await h.store.get<PolicyTurnRecord>(`${batchId}/write-greeting/${s.rollout_index}`, 'attempt-00/turn-0002.policy.json');
        assert.ok(last?.turnTokens && 'promptIds' in last.turnTokens);
        assert.deepEqual(s.input_ids, [...last.turnTokens.promptIds, ...last.turnTokens.completionIds]);
        assert.equal(s.loss_mask.filter((m) => m === 1).length, s.completion_spans.reduce((n, span) => n + (span ? span[1] - span[0] : 0), 0));
      }
      // Records written before the raw fields were dropped read the same: both fields (the same ids twice), or only the raw vLLM fields.
      const rewritten = group.rollouts[0];
      assert.ok(rewritten);
      const before = (await groupSamples(h.store, group)).samples;
      for (const [shape, turn] of [['both', 0], ['raw only', 1], ['raw only', 2]] as const) {
        const name = `attempt-00/turn-${String(turn).padStart(4, '0')}.policy.json`;
        const record = await h.store.get<PolicyTurnRecord>(rewritten.trajectoryRef, name);
        assert.ok(record?.turnTokens && 'promptIds' in record.turnTokens);
        const t = record.turnTokens;
        const raw = { prompt_token_ids: t.promptIds, token_ids: t.completionIds, logprobs: { content: t.completionIds.map((id, i) => ({ id, logprob: t.completionLogprobs[i] })) } };
        const legacy: Partial<PolicyTurnRecord> = { ...record, tokens: raw };
        if (shape === 'raw only') delete legacy.turnTokens;
        await h.store.put(rewritten.trajectoryRef, name, legacy);
      }
      // Their ids read the same; how their tokens were sampled they never said, so their logprobs' distribution is unknown:
      // left out by default, kept on request with the same token arrays and the reason.
      const tokenFields = (s: TrainingSample): Partial<TrainingSample> => ({ rollout_id: s.rollout_id, input_ids: s.input_ids, loss_mask: s.loss_mask, logprobs: s.logprobs, completion_spans: s.completion_spans, token_integrity: s.token_integrity });
      const oldShape = await groupSamples(h.store, group);
      assert.deepEqual(oldShape.excluded.map((e) => [e.rollout_id, e.why]), [[rewritten.workflowId, 'logprobs']]);
      assert.match(oldShape.excluded[0]?.reason ?? '', /turn 1: recorded before the pipeline kept how tokens were sampled/);
      const kept = await groupSamples(h.store, group, { keepMismatchedLogprobs: true });
      assert.deepEqual(kept.samples.map(tokenFields), before.map(tokenFields), 'old-shape records export the same token arrays');
      assert.equal(kept.keptMismatched, 1);
      // A Python trainer reads the same file into padded arrays (examples/python-trainer/load_export.py).
      const python = process.env.ROLLOUT_TRAINER_PYTHON;
      assert.ok(python, 'ROLLOUT_TRAINER_PYTHON is set by scripts/setup.sh (run the tests through `bash scripts/with-env.sh npm test`)');
      const py = spawnSync(python, [join(root, 'examples/python-trainer/load_export.py'), out], { encoding: 'utf8' });
      assert.equal(py.status, 0, py.stderr);
      const loaded = JSON.parse(py.stdout) as { samples: number; shape: number[]; generated_tokens: number; advantages: number[]; policy_versions: number[][]; integrity: string[] };
      assert.deepEqual(loaded.shape, [2, Math.max(...samples.map((s) => s.input_ids.length))]);
      assert.equal(loaded.generated_tokens, samples.reduce((n, s) => n + s.loss_mask.filter((m) => m === 1).length, 0));
      assert.deepEqual(loaded.advantages, samples.map((s) => s.advantage));
      assert.deepEqual(loaded.policy_versions, [[0, 0, 0], [0, 0, 0]]);
      assert.deepEqual(loaded.integrity, ['ok']);
    } finally {
      await server.close();
    }
  });

  test('the Python package (python/rollout_export) pulls a batch through `rollout export`, checks every sample, leaves broken rollouts out, and maps the samples to TRL, verl, SkyRL and prime-rl, tested from Python', async () => {
    const python = process.env.ROLLOUT_TRAINER_PYTHON;
    assert.ok(python, 'ROLLOUT_TRAINER_PYTHON is set by scripts/setup.sh test (scripts/ensure-trainer-venv.sh)');
    const installed = spawnSync(python, ['-c', 'import rollout_export'], { encoding: 'utf8' });
    assert.equal(installed.status, 0, `${python} has no rollout_export: run scripts/ensure-trainer-venv.sh and use the python it prints\n${installed.stderr}`);
    const okServer = await startScriptedOpenAIServer(threeTurns, { tokens: scriptedTokens().tokens });
    const brokenServer = await startScriptedOpenAIServer(threeTurns, { tokens: scriptedTokens({ reRenderTurn: 0 }).tokens });
    try {
      const ok = await run(okServer.baseUrl);
      const broken = await run(brokenServer.baseUrl);
      assert.ok(broken.group.rollouts.every((r) => r.tokenIntegrity?.status === 'broken'));
      const expected = join(mkdtempSync(join(tmpdir(), 'export-')), 'expected.jsonl');
      assert.equal((await exportBatch(h.client, h.store, ok.batchId, expected)).exported, 2);
      const py = spawnSync(python, ['-m', 'unittest', 'discover', '-v', '-s', join(root, 'python/rollout_export/tests')], {
        encoding: 'utf8',
        timeout: 600_000,
        env: {
          ...process.env,
          ROLLOUT_EXPORT_OK_BATCH: ok.batchId,
          ROLLOUT_EXPORT_BROKEN_BATCH: broken.batchId,
          ROLLOUT_EXPORT_TRAJECTORIES: join(h.scratch, 'trajectories'),
          ROLLOUT_EXPORT_EXPECTED: expected,
          ROLLOUT_CLI: `${process.execPath} ${join(root, 'client/bin/rollout.js')}`,
        },
      });
      assert.equal(py.status, 0, py.stderr);
      assert.match(py.stderr, /Ran 13 tests/); // test_pull_batch.py 4, test_trainers.py 9
      assert.doesNotMatch(py.stderr, /skipped/, 'every Python test ran');
    } finally {
      await okServer.close();
      await brokenServer.close();
    }
  });

  test('a server that re-renders an earlier turn differently: the break is recorded with turn and position, and the rollout is left out of the export', async () => {
    const ids = scriptedTokens({ reRenderTurn: 0 });
    const server = await startScriptedOpenAIServer(threeTurns, { tokens: ids.tokens });
    try {
      const { batchId, group } = await run(server.baseUrl);
      assert.equal(group.status, 'complete', 'a prefix break does not change the reward or the group');
      const position = ids.breaks[0];
      assert.ok(position !== undefined);
      for (const r of group.rollouts) {
        assert.equal(r.reward, 1);
        assert.equal(r.tokenIntegrity?.status, 'broken');
        assert.equal(r.tokenIntegrity?.turn, 1, 'turn 1 is the first prompt that re-renders turn 0');
        assert.equal(r.tokenIntegrity?.position, position);
        const turn1 = await h.store.get<PolicyTurnRecord>(r.trajectoryRef, 'attempt-00/turn-0001.policy.json');
        assert.ok(turn1?.prefixCheck && !turn1.prefixCheck.ok && turn1.prefixCheck.position === position, 'the trajectory keeps the break');
        assert.ok(turn1.turnTokens && 'promptIds' in turn1.turnTokens && turn1.turnTokens.promptIds[position] === ' '.codePointAt(0), 'the ids are kept as the server sent them, not patched');
        const record = (await h.store.queryRollouts({ batchId })).find((x) => x.result.index === r.index);
        assert.equal(record?.result.tokenIntegrity?.status, 'broken', 'the stored rollout record carries it too');
      }
      const out = join(mkdtempSync(join(tmpdir(), 'export-')), 'samples.jsonl');
      const report = await exportBatch(h.client, h.store, batchId, out);
      assert.equal(report.exported, 0);
      assert.equal(report.excluded.length, 2);
      for (const e of report.excluded) {
        assert.equal(e.why, 'broken');
        assert.match(e.reason, new RegExp(`turn 1, token ${position}`));
      }
      assert.equal(readFileSync(out, 'utf8'), '');
      const kept = await groupSamples(h.store, group, { keepBroken: true });
      assert.equal(kept.samples.length, 2);
      assert.equal(kept.keptBroken, 2);
      for (const s of kept.samples) {
        assert.deepEqual(s.token_integrity.unmasked_turns, [0], 'the re-rendered turn is not trained on');
        assert.deepEqual(sampleProblems(s), []);
      }
    } finally {
      await server.close();
    }
  });

  /** Starts a group on a slow scripted server, advances the version once every rollout has a turn at version 0. */
  async function advanceMidGroup(onStale: 'restart' | 'drop_group' | 'keep'): Promise<{ batchId: string; group: GroupResult }> {
    const server = await startScriptedOpenAIServer(threeTurns, { tokens: scriptedTokens().tokens, delayMs: 400 });
    try {
      const batchId = `stale-${onStale}-${Date.now()}-${seq++}`;
      const batch = await submitBatch(h.client, {
        batchId,
        taskQueues: h.taskQueues,
        tasks: [task],
        groupSize: 2,
        minValid: 1,
        policy: { kind: 'openai', baseUrl: server.baseUrl, model: 'scripted-model' },
        policyVersion: 0,
        staleness: { maxStaleness: 0, onStale },
      });
      await eventually(
        async () => Promise.all([0, 1].map(async (i) => (await h.store.get(`${batchId}/write-greeting/${i}`, 'attempt-00/turn-0000.policy.json')) !== undefined)),
        (seen) => seen.every(Boolean),
        'every rollout has a turn at version 0',
      );
      const advanced = await advancePolicyVersion(h.client, batchId, 1);
      assert.deepEqual(advanced.map((g) => [g.previous, g.current]), [[0, 1]]);
      await assert.rejects(advancePolicyVersion(h.client, batchId, 0), (err: Error & { cause?: Error }) => /policy version 0 is behind the group's current version 1: versions only go forward/.test(`${err.message} ${err.cause?.message ?? ''}`));
      for await (const group of batch.results()) return { batchId, group };
      throw new Error('no group result');
    } finally {
      await server.close();
    }
  }

  test('maxStaleness 0, onStale restart: a version advance mid-rollout restarts it on a fresh sandbox at the new version', async () => {
    const { group } = await advanceMidGroup('restart');
    assert.equal(group.status, 'complete');
    assert.equal(group.policyVersion, 1);
    for (const r of group.rollouts) {
      assert.equal(r.reward, 1);
      assert.ok(r.attemptHistory.some((a) => a.outcomeType === 'stale_restart'), JSON.stringify(r.attemptHistory));
      assert.ok((r.policyVersions ?? []).length > 0 && (r.policyVersions ?? []).every((v) => v === 1), `every turn of the final attempt ran at version 1: ${JSON.stringify(r.policyVersions)}`);
      assert.equal(r.staleness, 0);
      assert.equal(r.stale, false);
      assert.equal(r.staleRestarts, 1);
    }
  });

  test('maxStaleness 0, onStale drop_group: a version advance mid-group drops the group and says why; nothing is exported', async () => {
    const { batchId, group } = await advanceMidGroup('drop_group');
    assert.equal(group.status, 'stale');
    assert.match(group.statusReason, /policy version 0, 1 behind the current 1 \(maxStaleness 0\)/);
    assert.equal(group.validCount, 0);
    for (const r of group.rollouts) {
      assert.equal(r.valid, false);
      assert.equal(r.advantage, null);
      assert.equal(r.stale, true);
      assert.deepEqual(r.policyVersions?.slice(0, 1), [0]);
      assert.equal(r.policyVersions?.at(-1), 1, 'turns after the advance record the new version');
    }
    const out = join(mkdtempSync(join(tmpdir(), 'export-')), 'samples.jsonl');
    const report = await exportBatch(h.client, h.store, batchId, out);
    assert.equal(report.exported, 0);
    assert.ok(report.excluded.every((e) => e.why === 'not_valid' && /group dropped/.test(e.reason)));
  });

  test('maxStaleness 0, onStale keep: the rollouts stay valid and are tagged stale', async () => {
    const { group } = await advanceMidGroup('keep');
    assert.equal(group.status, 'complete');
    for (const r of group.rollouts) {
      assert.equal(r.valid, true);
      assert.equal(r.staleness, 1);
      assert.equal(r.stale, true);
    }
  });
});
