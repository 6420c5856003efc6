/**
 * The `harness` policy: mini-swe-agent and Harbor's terminus-2 as published on PyPI (cached venvs from
 * scripts/ensure-harnesses.sh), unmodified, drives real sandboxes through the bridge while every
 * model call goes through the capture endpoint to an inference server and is recorded as a turn.
 * The scripted OpenAI endpoint (with vLLM-style token ids) is the fault injector: an answer the
 * harness cannot read makes it drop that answer from its history, the exact-prefix rule breaks there
 * by design, and the export has one sample per training segment. The real llama.cpp model runs the
 * sample tasks end to end in harnessRealModel.test.ts (beside the real model's other suites, one at a
 * time). Skipped without the harness venv.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { PolicyTurnRecord } from '../../agent/conversation.js';
import { exportBatch } from '../../client/export/exportBatch.js';
import { sampleProblems, type TrainingSample } from '../../client/export/trainingSample.js';
import { loadTrajectory } from '../../client/loadTrajectory.js';
import { submitBatch, type SubmitBatchOptions } from '../../client/submitBatch.js';
import type { GroupResult, PolicyConfig, RolloutResult } from '../../shared/pipeline.js';
import { runHarnessBatch, skipWithoutHarnessNamed as skipWithout } from '../helpers/harnessKit.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { startScriptedOpenAIServer, type Script, type ScriptedOpenAIServer } from '../helpers/scriptedOpenAIServer.js';
import { scriptedTokens } from '../helpers/scriptedTokens.js';
import { runRolloutCli } from '../helpers/rolloutCli.js';
import { testServerAddress } from '../helpers/temporal.js';
import { eventually } from '../helpers/eventually.js';
import { rolloutWorkflowId } from '../../shared/names.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const examples = join(root, 'examples/tasks');
const skipWithoutHarness = skipWithout('mini-swe-agent');

let h: Harness;
let seq = 0;

before(async () => {
  if (skipWithoutHarness) return;
  h = await startHarness('harness-policy');
  await h.startWorkers();
});

after(async () => {
  await h?.close();
});

const run = (options: Omit<SubmitBatchOptions, 'batchId' | 'taskQueues'>): Promise<{ batchId: string; groups: GroupResult[] }> => runHarnessBatch(h, `harness-${Date.now()}-${seq++}`, options);

function miniOn(baseUrl: string, model: string, settings: Record<string, unknown> = {}): PolicyConfig {
  return { kind: 'harness', harness: 'mini-swe-agent', settings, inference: { kind: 'openai', baseUrl, model, sampling: { temperature: 1, max_tokens: 256 } } };
}

const GREETING = "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt";
const SUBMIT = 'echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT';

/**
 * An answer mini-swe-agent cannot read (no tool call), then the solution, then its submit command. The
 * harness drops the unreadable answer and adds its format error instead: the second request has no
 * assistant message either, only one message more.
 */
const unreadableThenSolve: Script = (req, assistantTurns) => {
  if (assistantTurns === 0 && req.messages.length <= 2) return { content: 'I will think about it first.' };
  if (assistantTurns === 0) return { content: 'Writing the greeting.', toolCalls: [{ name: 'bash', arguments: { command: GREETING } }] };
  return { content: 'Done.', toolCalls: [{ name: 'bash', arguments: { command: SUBMIT } }] };
};

const readJsonl = (file: string): TrainingSample[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as TrainingSample);

const only = (groups: GroupResult[]): RolloutResult[] => {
  assert.equal(groups.length, 1);
  return groups[0]?.rollouts ?? [];
};

describe('the harness policy: published harnesses drive the sandboxes, every model call captured', { timeout: 1_800_000, skip: skipWithoutHarness }, () => {
  test('a dropped answer starts a new training segment; the export has one sample per segment, each exact', async () => {
    const ids = scriptedTokens();
    const server = await startScriptedOpenAIServer(unreadableThenSolve, { tokens: ids.tokens });
    try {
      const { batchId, groups } = await run({ tasks: [join(examples, 'write-greeting')], groupSize: 2, minValid: 1, policy: miniOn(server.baseUrl, 'scripted-model'), limits: { maxTurns: 6 } });
      for (const r of only(groups)) {
        assert.deepEqual([r.outcomeClass, r.outcomeType, r.reward, r.valid], ['ok', 'submitted', 1, true], JSON.stringify(r.attemptHistory));
        assert.deepEqual(r.tokenIntegrity, { status: 'ok', attempt: 0, turns: 3, segmentStarts: [1] });
        const [attempt] = await loadTrajectory(h.store, r.trajectoryRef);
        assert.ok(attempt);
        assert.equal(attempt.turns.length, 3, 'each of the three model calls is a turn');
        const [t0, t1, t2] = attempt.turns;
        assert.ok(t0 && t1 && t2);
        for (const t of attempt.turns) {
          assert.ok(t.policy.turnTokens && 'promptIds' in t.policy.turnTokens && t.policy.turnTokens.completionIds.length > 0, 'prompt and completion ids on every call');
          assert.ok(t.policy.harnessRequest && t.policy.harnessRequest.messages.length >= 2, 'the conversation the harness sent is kept');
          assert.deepEqual(t.policy.harnessRequest.tools.map((tool) => tool.function.name), ['bash'], "the harness's own tool");
        }
        // mini-swe-agent drops an answer it cannot read: the next prompt does not hold it.
        assert.equal(t0.tools.length, 0);
        assert.match(t1.policy.segmentStart ?? '', /./, 'the prompt after the dropped answer starts a segment');
        assert.equal(t2.policy.segmentStart, undefined);
        assert.deepEqual(t2.policy.prefixCheck, { ok: true });
        // The commands it ran went through the bridge into the sandbox, recorded under the call that asked for them.
        assert.deepEqual(t1.tools.map((t) => [t.name, JSON.parse(t.arguments) as unknown, t.exitCode]), [['bash', { command: GREETING }, 0]]);
        assert.equal(t2.tools[0]?.observation.trim(), 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT');
        assert.ok(t1.tools[0]?.toolCallId.startsWith('call_'), "the harness's tool call id");
        const trajectory = await h.store.get<{ trajectory_format: string; info: { exit_status: string } }>(r.trajectoryRef, 'attempt-00/harness-trajectory.json');
        assert.equal(trajectory?.info.exit_status, 'Submitted', "the harness's own trajectory is kept beside the turns");
      }
      // The group's sampling, not the harness's: every request carried our temperature and token fields.
      assert.ok(server.requests.length === 6 && server.requests.every((q) => q.temperature === 1 && q.max_tokens === 256 && (q as unknown as { return_token_ids?: boolean }).return_token_ids === true));
      const out = join(mkdtempSync(join(tmpdir(), 'harness-export-')), 'samples.jsonl');
      const report = await exportBatch(h.client, h.store, batchId, out);
      assert.deepEqual(report.excluded, []);
      const samples = readJsonl(out);
      assert.equal(samples.length, 4, 'two rollouts, two segments each');
      for (const s of samples) {
        assert.deepEqual(sampleProblems(s), []);
        assert.equal(s.segments, 2);
        assert.equal(s.reward, 1);
        assert.equal(s.token_integrity.status, 'ok');
      }
      const first = samples.find((s) => s.rollout_index === 0 && s.segment === 0);
      const second = samples.find((s) => s.rollout_index === 0 && s.segment === 1);
      assert.ok(first && second);
      assert.deepEqual([first.segment_turns, second.segment_turns], [[0, 1], [1, 3]]);
      assert.deepEqual([first.completion_spans.length, second.completion_spans.length], [1, 2]);
      assert.equal(first.advantage, second.advantage, "every segment carries the rollout's advantage");
      const last = await h.store.get<PolicyTurnRecord>(`${batchId}/write-greeting/0`, 'attempt-00/turn-0002.policy.json');
      assert.ok(last?.turnTokens && 'promptIds' in last.turnTokens);
      assert.deepEqual(second.input_ids, [...last.turnTokens.promptIds, ...last.turnTokens.completionIds], 'the later segment is the last prompt and answer');
      // `rollout show` reads a harness's rollout as it reads ours: its answers, the commands it ran, where a segment starts.
      const shown = await runRolloutCli(['show', first.rollout_id, '--trajectories', h.store.root, '--address', testServerAddress()], tmpdir());
      assert.equal(shown.code, 0, shown.stderr);
      assert.match(shown.stdout, /mini-swe-agent on scripted-model/);
      assert.match(shown.stdout, /Hello, rollout!/, 'the command it ran');
      assert.match(shown.stdout, /new training segment \(the harness rewrote its history\)/);
      assert.deepEqual(await h.provider.list(), [], 'every sandbox was torn down');
    } finally {
      await server.close();
    }
  });

  test('while it runs, the Web UI shows the harness run, its captured calls and the commands it ran', async () => {
    // A command that outlasts the SDK's heartbeat throttle (0.8 x the 15 s heartbeat timeout): the details of the beat after it reach the server.
    const slow: Script = (req, assistantTurns) => (assistantTurns === 1 ? { content: 'Waiting.', toolCalls: [{ name: 'bash', arguments: { command: 'sleep 14' } }] } : unreadableThenSolve(req, assistantTurns === 0 ? 0 : assistantTurns - 1));
    const server = await startScriptedOpenAIServer(slow, { tokens: scriptedTokens().tokens });
    try {
      const batchId = `harness-ui-${Date.now()}`;
      const batch = await submitBatch(h.client, { batchId, taskQueues: h.taskQueues, tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, policy: miniOn(server.baseUrl, 'scripted-model') });
      const handle = h.client.workflow.getHandle(rolloutWorkflowId(batchId, 'write-greeting', 0));
      const seen = new Set<string>();
      // What the UI's pending-activity panel shows: the activity and its last heartbeat's details.
      type Beat = { harness: string; turns: number; commands: number; recent: string[] };
      const details = await eventually(
        async (): Promise<Beat | undefined> => {
          const described = await handle.describe().catch(() => undefined); // the group starts it a moment later
          if (!described) return undefined;
          const { raw } = described;
          const running = (raw.pendingActivities ?? []).find((a) => a.activityType?.name === 'runHarness');
          const payload = running?.heartbeatDetails?.payloads?.[0]?.data;
          const beat = payload ? (JSON.parse(Buffer.from(payload).toString('utf8')) as Beat) : undefined;
          for (const line of beat?.recent ?? []) seen.add(line);
          return beat;
        },
        (beat) => beat !== undefined && beat.commands >= 1,
        'a heartbeat of the harness run after its first command',
      );
      assert.ok(details);
      assert.equal(details.harness, 'mini-swe-agent');
      assert.ok([...seen].some((l) => /^turn 1: model answered \(bash\) · new segment$/.test(l)), [...seen].join('\n'));
      assert.ok([...seen].some((l) => l.startsWith("turn 1: $ printf 'Hello, rollout!") && l.endsWith('→ exit 0')), [...seen].join('\n'));
      for await (const g of batch.results()) assert.equal(g.rollouts[0]?.reward, 1);
      // The activity carries its summary in the history (the UI's event list).
      const history = await handle.fetchHistory();
      const scheduled = history.events?.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runHarness');
      const summary = scheduled?.userMetadata?.summary?.data;
      assert.match(summary ? Buffer.from(summary).toString('utf8') : '', /agent: mini-swe-agent on scripted-model, sandbox sbx-/);
      // Its result lists every captured call and command: what the UI shows of the run once it ended.
      const completed = history.events?.find((e) => e.activityTaskCompletedEventAttributes?.scheduledEventId !== undefined && Number(e.activityTaskCompletedEventAttributes.scheduledEventId) === Number(scheduled?.eventId));
      const result = completed?.activityTaskCompletedEventAttributes?.result?.payloads?.[0]?.data;
      const log = result ? (JSON.parse(Buffer.from(result).toString('utf8')) as { log: string[] }).log : [];
      assert.deepEqual(
        log.map((l) => l.replace(/ → .*$/, '')),
        ['turn 0: model answered', 'turn 1: model answered (bash) · new segment', "turn 1: $ printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt", 'turn 2: model answered (bash)', 'turn 2: $ sleep 14', 'turn 3: model answered (bash)', 'turn 3: $ echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT'],
      );
    } finally {
      await server.close();
    }
  });

  test('bad harness set-ups get errors that name the harness and the fix', async () => {
    const server: ScriptedOpenAIServer = await startScriptedOpenAIServer(unreadableThenSolve, { tokens: scriptedTokens().tokens });
    try {
      // Unknown: refused before anything starts.
      await assert.rejects(
        run({ tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, policy: { ...miniOn(server.baseUrl, 'm'), harness: 'no-such-agent' } as PolicyConfig }),
        (err: Error) => /unknown harness "no-such-agent"; the harnesses are mini-swe-agent/.test(err.message),
      );
      // Never calls the model: a template of its own settings that cannot render stops it before its first call.
      const silent = await run({ tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, failurePolicy: { infra: { retries: 0 } }, policy: miniOn(server.baseUrl, 'm', { agent: { instance_template: '{{ no_such_variable }}' } }) });
      const [quiet] = only(silent.groups);
      assert.deepEqual([quiet?.outcomeClass, quiet?.outcomeType, quiet?.valid], ['infra', 'harness_never_called_model', false]);
      const why = quiet?.attemptHistory[0];
      assert.match(why?.message ?? '', /mini-swe-agent ended without calling the model once.*Fix: check policy\.settings/);
      assert.ok(why?.evidence?.some((e) => /stderr: .*UndefinedError|no_such_variable/.test(e)), `its stderr tail is the evidence: ${JSON.stringify(why?.evidence)}`);
      // Crashes on its own after calling the model: the harness's, with its stderr tail.
      const crashed = await run({ tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, policy: miniOn(server.baseUrl, 'm', { model: { observation_template: '{{ no_such_variable }}' } }) });
      const [crash] = only(crashed.groups);
      assert.deepEqual([crash?.outcomeClass, crash?.outcomeType, crash?.valid, typeof crash?.reward], ['model', 'harness_crashed', true, 'number']);
      assert.ok(crash?.attemptHistory[0]?.evidence?.some((e) => /stderr: /.test(e)));
      // Not installed on the worker's host.
      const saved = process.env.ROLLOUT_HARNESS_HOME;
      process.env.ROLLOUT_HARNESS_HOME = mkdtempSync(join(tmpdir(), 'no-harnesses-'));
      try {
        const missing = await run({ tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, failurePolicy: { infra: { retries: 0 } }, policy: miniOn(server.baseUrl, 'm') });
        const [m] = only(missing.groups);
        assert.deepEqual([m?.outcomeClass, m?.outcomeType], ['infra', 'harness_not_installed']);
        assert.match(m?.attemptHistory[0]?.message ?? '', /harness mini-swe-agent 2\.4\.6 is not installed on host .*Fix: run `bash scripts\/ensure-harnesses\.sh`/);
      } finally {
        if (saved === undefined) delete process.env.ROLLOUT_HARNESS_HOME;
        else process.env.ROLLOUT_HARNESS_HOME = saved;
      }
      assert.deepEqual(await h.provider.list(), [], 'every sandbox was torn down');
    } finally {
      await server.close();
    }
  });

  test("Harbor's terminus-2 drives the sandbox's tmux through the bridge; its calls are captured, its completion confirmed", { skip: skipWithout('terminus-2') }, async () => {
    // terminus-2 reads a JSON answer from the text (no tools); it asks to confirm a first task_complete.
    const answer = (commands: { keystrokes: string; duration: number }[], done: boolean): string => JSON.stringify({ analysis: 'a', plan: 'p', commands, task_complete: done });
    const terminus: Script = (_req, assistantTurns) => ({ content: assistantTurns === 0 ? answer([{ keystrokes: `${GREETING}\n`, duration: 0.5 }], false) : answer([], true) });
    const server = await startScriptedOpenAIServer(terminus, { tokens: scriptedTokens().tokens });
    try {
      const policy: PolicyConfig = { kind: 'harness', harness: 'terminus-2', inference: { kind: 'openai', baseUrl: server.baseUrl, model: 'scripted-model', sampling: { temperature: 1, max_tokens: 512 } } };
      const { batchId, groups } = await run({ tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, policy, limits: { maxTurns: 6 } });
      const [r] = only(groups);
      assert.ok(r);
      assert.deepEqual([r.outcomeClass, r.outcomeType, r.reward], ['ok', 'submitted', 1], JSON.stringify(r.attemptHistory));
      assert.equal(r.tokenIntegrity?.status, 'ok');
      const [attempt] = await loadTrajectory(h.store, r.trajectoryRef);
      assert.equal(attempt?.turns.length, 3, 'the commands, task_complete, and its confirmation');
      assert.ok(server.requests.every((q) => q.tools === undefined), 'no tools offered: terminus-2 sends none');
      // Its commands are tmux keystrokes sent through the bridge into the sandbox.
      const commands = (attempt?.turns ?? []).flatMap((t) => t.tools.map((c) => (JSON.parse(c.arguments) as { command: string }).command));
      assert.ok(commands.some((c) => c.includes('tmux new-session')), commands.join('\n'));
      assert.ok(commands.some((c) => c.includes('tmux send-keys') && c.includes('Hello, rollout!')), commands.join('\n'));
      const samples = join(mkdtempSync(join(tmpdir(), 'terminus-export-')), 'samples.jsonl');
      await exportBatch(h.client, h.store, batchId, samples);
      for (const sample of readJsonl(samples)) assert.deepEqual(sampleProblems(sample), []);
      assert.deepEqual(await h.provider.list(), [], 'every sandbox was torn down');
    } finally {
      await server.close();
    }
  });

  test("terminus-2 summarizes when the context overflows: its history is rewritten, and each stretch of it is its own training sample", { skip: skipWithout('terminus-2') }, async () => {
    const answer = (commands: { keystrokes: string; duration: number }[], done: boolean): string => JSON.stringify({ analysis: 'a', plan: 'p', commands, task_complete: done });
    let overflowed = false;
    // Its second call overflows once (llama.cpp's words); the summary, questions, answers and everything after get answers.
    const script: Script = (_req, assistantTurns) => {
      if (assistantTurns === 0) return { content: answer([{ keystrokes: `${GREETING}\n`, duration: 0.5 }], false) };
      if (!overflowed) {
        overflowed = true;
        return { error: { status: 400, message: 'the request exceeds the available context size, try increasing it' } };
      }
      return { content: answer([], true) };
    };
    const server = await startScriptedOpenAIServer(script, { tokens: scriptedTokens().tokens });
    try {
      const policy: PolicyConfig = { kind: 'harness', harness: 'terminus-2', inference: { kind: 'openai', baseUrl: server.baseUrl, model: 'scripted-model', sampling: { max_tokens: 512 } } };
      const { batchId, groups } = await run({ tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, policy, limits: { maxTurns: 12 } });
      const [r] = only(groups);
      assert.ok(r && overflowed);
      assert.equal(r.reward, 1, JSON.stringify(r.attemptHistory));
      const starts = r.tokenIntegrity?.segmentStarts ?? [];
      assert.equal(r.tokenIntegrity?.status, 'ok');
      // Harbor 0.25.0's summary: the summary call extends the (unwound) conversation; the questions call starts
      // afresh, the answers call and the handed-off conversation are each rewritten; the confirmation extends that.
      assert.deepEqual([r.tokenIntegrity?.turns, starts], [6, [2, 3, 4]], 'turn 0, summary, questions, answers, handoff, confirmation');
      const out = join(mkdtempSync(join(tmpdir(), 'terminus-segments-')), 'samples.jsonl');
      await exportBatch(h.client, h.store, batchId, out);
      const samples = readJsonl(out);
      assert.equal(samples.length, starts.length + 1, 'one sample per segment');
      const turns = r.tokenIntegrity?.turns ?? 0;
      assert.deepEqual(samples.map((x) => x.segment_turns), [0, ...starts].map((start, k) => [start, [...starts, turns][k]]));
      for (const sample of samples) {
        assert.deepEqual(sampleProblems(sample), []);
        assert.ok(sample.loss_mask.some((m) => m === 1), 'every segment holds generated tokens');
        assert.equal(sample.reward, 1);
      }
    } finally {
      await server.close();
    }
  });
});
