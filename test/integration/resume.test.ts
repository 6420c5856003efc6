/**
 * failurePolicy.resume 'replay': a sandbox lost at turn k, and the next attempt goes on at turn k on
 * a fresh sandbox, its files restored by replaying the recorded tool calls (each checked by exit code
 * and by the digest of the files it left), with no model call for the turns already done and the
 * exact-prefix sample intact; an attempt whose commands leave other files on every run falls back
 * to turn 0 and says where the replay diverged; a branch of N shares a rollout's first turns and
 * goes on N times. Real dev server, real local sandboxes, a scripted
 * OpenAI endpoint (with token ids), both places an attempt can run.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { PolicyTurnRecord, ToolTurnRecord } from '../../agent/conversation.js';
import { FsTrajectoryStore } from '../../stores/fsTrajectoryStore.js';
import { BranchError, branchRollout } from '../../client/branch/branchRollout.js';
import { exportBatch } from '../../client/export/exportBatch.js';
import type { TrainingSample } from '../../client/export/trainingSample.js';
import { readRolloutState } from '../../client/show/readRolloutState.js';
import { buildRolloutView } from '../../client/show/rolloutView.js';
import { rolloutText } from '../../client/show/rolloutText.js';
import { submitBatch } from '../../client/submitBatch.js';
import type { GroupResult, RolloutResult } from '../../shared/pipeline.js';
import { localHandle } from '../../shared/sandbox.js';
import { eventually } from '../helpers/eventually.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { startScriptedOpenAIServer, type ScriptedOpenAIServer } from '../helpers/scriptedOpenAIServer.js';
import { testServerAddress } from '../helpers/temporal.js';
import { scriptedTokens } from '../helpers/scriptedTokens.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const examples = join(root, 'examples/tasks');
const WRITE_GREETING = "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt";
/** The command of the turn the sandbox is killed in; the turns after the kill find it as they want it. */
let longCommand = 'sleep 8';
/** Which script the endpoint follows (one endpoint for the whole file). */
let script: 'steady' | 'stamped' | 'tree' = 'steady';
let h: Harness;
let llm: ScriptedOpenAIServer;

before(async () => {
  h = await startHarness('resume');
  llm = await startScriptedOpenAIServer(
    (req, turn) => {
      // The tree's last command: the right answer on an even seed only, so siblings differ in reward.
      const tree = ['mkdir -p /app/work', 'echo one > /app/work/a.txt', 'cat /app/work/a.txt', (req.seed ?? 0) % 2 === 0 ? WRITE_GREETING : 'echo not today'];
      const steady = [`mkdir -p /app/work && echo one > /app/work/a.txt`, 'echo two >> /app/work/a.txt && wc -l /app/work/a.txt', longCommand, `cat /app/work/a.txt && ${WRITE_GREETING}`];
      // A time in nanoseconds written to a file: no replay leaves the same file.
      const stamped = ['date +%s%N > /app/stamp.txt', longCommand, WRITE_GREETING];
      const commands = script === 'steady' ? steady : script === 'tree' ? tree : stamped;
      const command = commands[turn];
      return command === undefined ? { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] } : { content: `Step ${turn}.`, toolCalls: [{ name: 'bash', arguments: { command } }] };
    },
    { tokens: scriptedTokens().tokens },
  );
  await h.startWorkers();
});

after(async () => {
  await llm?.close();
  await h?.close();
});

function runProcess(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(command, args, { env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

/** Starts a one-rollout batch, kills its sandbox once turn `killAt`'s answer is in (its command then runs), and returns the result. */
async function runAndKill(name: string, attemptOn: 'workflow' | 'host', killAt: number): Promise<{ batchId: string; r: RolloutResult; requests: number }> {
  longCommand = 'sleep 8';
  const before = llm.requests.length;
  const batchId = `resume-${name}-${attemptOn}-${Date.now()}`;
  const batch = await submitBatch(h.client, {
    batchId,
    taskQueues: h.taskQueues,
    tasks: [join(examples, 'write-greeting')],
    groupSize: 1,
    minValid: 1,
    attemptOn,
    failurePolicy: { infra: { retries: 1, backoffSec: 1, onExhausted: 'mask' }, resume: 'replay' },
    policy: { kind: 'openai', baseUrl: llm.baseUrl, model: 'scripted-model', sampling: { seed: 3 } },
  });
  const ref = `${batchId}/write-greeting/0`;
  const answered = `attempt-00/turn-${String(killAt).padStart(4, '0')}.policy.json`;
  await eventually(async () => (await h.store.list(ref, 'attempt-00/').catch((): string[] => [])).includes(answered), (yes) => yes, `turn ${killAt} answered`);
  await new Promise((r) => setTimeout(r, 1_000));
  longCommand = 'true';
  const alive = await h.provider.list();
  assert.equal(alive.length, 1, 'one sandbox, in its long command');
  for (const record of alive) if (record.handle) process.kill(localHandle(record.handle).pid, 'SIGKILL');
  const groups: GroupResult[] = [];
  for await (const g of batch.results()) groups.push(g);
  const r = groups[0]?.rollouts[0];
  assert.ok(r, 'a rollout result');
  return { batchId, r, requests: llm.requests.length - before };
}

for (const attemptOn of ['workflow', 'host'] as const) {
  test(`resume (${attemptOn}): a sandbox lost at turn 2 goes on at turn 2 on a fresh sandbox, its files restored by replay, no model call for turns 0-2, the exact-prefix sample intact`, { timeout: 300_000 }, async () => {
    script = 'steady';
    const { batchId, r, requests } = await runAndKill('steady', attemptOn, 2);
    assert.deepEqual([r.reward, r.outcomeClass, r.outcomeType, r.attempts], [1, 'ok', 'submitted', 2], JSON.stringify(r.attemptHistory));
    assert.equal(`${r.attemptHistory[0]?.outcomeClass}/${r.attemptHistory[0]?.outcomeType}`, 'infra/sandbox_lost');
    assert.deepEqual(r.attemptHistory[1]?.resumed, { fromAttempt: 0, turns: 2, nextTurnAnswered: true, method: 'replay', replayedCalls: 2, replayMs: r.attemptHistory[1]?.resumed?.replayMs, stateChecked: true, drift: 0 }, 'turns 0-1 taken over, turn 2 answered');
    // Five answers in all (turns 0-4); a restart would have asked for turns 0-2 again.
    assert.equal(requests, 5, 'one model call per turn of the rollout, none again after the loss');
    assert.equal(r.turns, 5);
    assert.deepEqual(r.policyVersions, [0, 0, 0, 0, 0]);
    assert.deepEqual(r.tokenIntegrity, { status: 'ok', attempt: 1, turns: 5 }, 'every turn keeps its ids and each prompt extends the one before');

    const ref = r.trajectoryRef;
    for (const turn of [0, 1, 2]) {
      const name = (a: number): string => `attempt-0${a}/turn-000${turn}.policy.json`;
      const first = await h.store.get<PolicyTurnRecord>(ref, name(0));
      const taken = await h.store.get<PolicyTurnRecord>(ref, name(1));
      assert.deepEqual(taken?.restored, { fromAttempt: 0 }, `turn ${turn} is marked as taken over`);
      assert.deepEqual({ ...taken, restored: undefined }, { ...first, restored: undefined }, `turn ${turn}: the same answer, ids and logprobs as recorded the first time`);
    }
    // The fourth turn read the files the first two made: the replay brought them back.
    const read = await h.store.get<ToolTurnRecord>(ref, 'attempt-01/turn-0003.tool-00.json');
    assert.equal(read?.exitCode, 0);
    assert.match(read?.observation ?? '', /stdout:\none\ntwo\n/, `the restored file: ${read?.observation}`);
    const replayed = await h.store.get<ToolTurnRecord>(ref, 'attempt-01/turn-0001.tool-00.json');
    assert.deepEqual([replayed?.restored?.fromAttempt, replayed?.restored?.replayExitCode, replayed?.restored?.drift], [0, 0, false]);
    assert.ok(replayed?.state?.areas['/app/work'], 'the call keeps the digest of what it left');

    const out = join(mkdtempSync(join(tmpdir(), 'resume-export-')), 'samples.jsonl');
    const report = await exportBatch(h.client, h.store, batchId, out);
    assert.equal(report.exported, 1, JSON.stringify(report.excluded));
    const sample = JSON.parse(readFileSync(out, 'utf8').trim()) as TrainingSample;
    assert.equal(sample.token_integrity.status, 'ok');
    assert.equal(sample.completion_spans.length, 5, 'one span per answer, the taken-over ones included');
    const last = await h.store.get<PolicyTurnRecord>(ref, 'attempt-01/turn-0004.policy.json');
    assert.ok(last?.turnTokens && 'promptIds' in last.turnTokens);
    assert.deepEqual(sample.input_ids, [...last.turnTokens.promptIds, ...last.turnTokens.completionIds], 'the last prompt plus its answer is the whole sequence');

    const shown = rolloutText(await buildRolloutView(await readRolloutState(h.client, r.workflowId, 'the test server'), h.store, { lines: 5 }));
    assert.match(shown, /resumed at turn 2: turns 0-1 taken over from attempt 1, restored by replaying 2 tool calls in .* \(each call's exit code and the sandbox's files checked\); turn 2's answer taken over too/);
    assert.match(shown, /taken over from attempt 1 \(the model was not asked again\); its call replayed into this sandbox/);
    assert.deepEqual(await h.provider.list(), [], 'every sandbox torn down');
  });
}

test('resume: commands that leave other files on every run diverge in the replay; the attempt starts at turn 0 and says where', { timeout: 300_000 }, async () => {
  script = 'stamped';
  const { r, requests } = await runAndKill('stamped', 'workflow', 1);
  assert.deepEqual([r.reward, r.outcomeClass, r.attempts], [1, 'ok', 2], JSON.stringify(r.attemptHistory));
  const second = r.attemptHistory[1];
  assert.equal(second?.resumed, undefined, 'nothing taken over');
  assert.deepEqual([second?.divergence?.fromAttempt, second?.divergence?.turn, second?.divergence?.callIndex, second?.divergence?.replayedCalls], [0, 0, 0, 1], JSON.stringify(second?.divergence));
  assert.match(second?.divergence?.what ?? '', /files differ after the call: \/app\/stamp\.txt/);
  assert.equal(requests, 2 + 4, 'two answers before the loss, then all four again from turn 0');
  assert.deepEqual(r.tokenIntegrity, { status: 'ok', attempt: 1, turns: 4 });
  const first = await h.store.get<PolicyTurnRecord>(r.trajectoryRef, 'attempt-01/turn-0000.policy.json');
  assert.equal(first?.restored, undefined, 'turn 0 generated again');
  const shown = rolloutText(await buildRolloutView(await readRolloutState(h.client, r.workflowId, 'the test server'), h.store, { lines: 5 }));
  assert.match(shown, /resume refused: the replay of attempt 1 diverged at turn 0, call 0 \(the sandbox's files differ after the call: \/app\/stamp\.txt\); started at turn 0 on a fresh sandbox/);
  assert.deepEqual(await h.provider.list(), [], 'every sandbox torn down, the diverged one too');
});

test('branch: N rollouts share a finished rollout\'s turns 0..K-1 (same ids, replayed into their own sandboxes) and go on N times from turn K; a bad branch request names the thing and the fix', { timeout: 300_000 }, async () => {
  script = 'steady';
  longCommand = 'true';
  const parentBatch = `resume-branch-parent-${Date.now()}`;
  const submitted = await submitBatch(h.client, { batchId: parentBatch, taskQueues: h.taskQueues, tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, policy: { kind: 'openai', baseUrl: llm.baseUrl, model: 'scripted-model', sampling: { seed: 3 } } });
  const parents: GroupResult[] = [];
  for await (const g of submitted.results()) parents.push(g);
  const parent = parents[0]?.rollouts[0] as RolloutResult;
  assert.deepEqual([parent.reward, parent.turns], [1, 5]);

  const before = llm.requests.length;
  const branches = await branchRollout(h.client, h.store, { rolloutId: parent.workflowId, atTurn: 2, n: 2 }, 'the test server');
  const groups: GroupResult[] = [];
  for await (const g of branches.batch.results()) groups.push(g);
  const siblings = groups[0]?.rollouts ?? [];
  assert.equal(siblings.length, 2);
  assert.equal(llm.requests.length - before, 2 * 3, 'each branch asks the model for turns 2-4 only');
  const seeds = new Set(llm.requests.slice(before).map((r) => r.seed));
  assert.equal(seeds.size, 6, 'every branch turn has its own seed');
  for (const b of siblings) {
    assert.deepEqual([b.reward, b.outcomeClass, b.turns, b.attempts], [1, 'ok', 5, 1], JSON.stringify(b.attemptHistory));
    assert.deepEqual(b.branch, { parentRolloutId: parent.workflowId, atTurn: 2, sharedTurns: 2 });
    assert.deepEqual([b.attemptHistory[0]?.resumed?.fromRollout, b.attemptHistory[0]?.resumed?.turns, b.attemptHistory[0]?.resumed?.nextTurnAnswered], [parent.workflowId, 2, false]);
    assert.deepEqual(b.tokenIntegrity, { status: 'ok', attempt: 0, turns: 5 });
    for (const turn of [0, 1]) {
      const name = `attempt-00/turn-000${turn}.policy.json`;
      const mine = await h.store.get<PolicyTurnRecord>(b.trajectoryRef, name);
      const theirs = await h.store.get<PolicyTurnRecord>(parent.trajectoryRef, name);
      assert.deepEqual({ ...mine, restored: undefined }, { ...theirs, restored: undefined }, `turn ${turn} shared as the parent generated it`);
    }
  }
  const out = join(mkdtempSync(join(tmpdir(), 'branch-export-')), 'samples.jsonl');
  const report = await exportBatch(h.client, h.store, branches.batch.batchId, out);
  assert.equal(report.exported, 2, JSON.stringify(report.excluded));
  const samples = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as TrainingSample);
  const turn2 = await h.store.get<PolicyTurnRecord>(siblings[0]?.trajectoryRef ?? '', 'attempt-00/turn-0002.policy.json');
  const prefix = turn2?.turnTokens && 'promptIds' in turn2.turnTokens ? turn2.turnTokens.promptIds.length : -1;
  for (const s of samples) {
    assert.deepEqual([s.parent_rollout_id, s.branch_turn, s.prefix_length], [parent.workflowId, 2, prefix]);
    assert.equal(s.input_ids.slice(0, prefix).join(), (samples[0]?.input_ids ?? []).slice(0, prefix).join(), 'the siblings share their prefix id for id');
  }
  const shown = rolloutText(await buildRolloutView(await readRolloutState(h.client, siblings[0]?.workflowId ?? '', 'the test server'), h.store, { lines: 5 }));
  assert.match(shown, new RegExp(`branch of ${parent.workflowId.replace(/[/.]/g, '\\$&')} at turn 2: shares its turns 0-1`));

  // The same from Python (python/rollout_export: branch_rollout runs `rollout branch --json`).
  const python = process.env.ROLLOUT_TRAINER_PYTHON;
  assert.ok(python, 'ROLLOUT_TRAINER_PYTHON is set by scripts/setup.sh test');
  // Asynchronously: this process's workers run the branches meanwhile.
  const fromPython = await runProcess(
    python,
    [
      '-c',
      [
        'import json, sys',
        'from rollout_export import BranchError, branch_rollout',
        'kw = dict(address=sys.argv[2], store=sys.argv[3])',
        'b = branch_rollout(sys.argv[1], at_turn=3, n=1, **kw)',
        'try:\n    branch_rollout(sys.argv[1], at_turn=9, n=1, **kw)\n    bad = None\nexcept BranchError as e:\n    bad = str(e)',
        'print(json.dumps({"batch": b.batch_id, "rollouts": b.rollouts, "bad": bad}))',
      ].join('\n'),
      parent.workflowId,
      testServerAddress(),
      `fs:${join(h.scratch, 'trajectories')}`,
    ],
    { ...process.env, PYTHONPATH: join(root, 'python/rollout_export'), ROLLOUT_CLI: `${process.execPath} ${join(root, 'client/bin/rollout.js')}` },
  );
  assert.equal(fromPython.code, 0, fromPython.stderr);
  const py = JSON.parse(fromPython.stdout) as { batch: string; rollouts: RolloutResult[]; bad: string | null };
  assert.deepEqual(py.rollouts.map((r) => [r.reward, r.branch?.atTurn, r.branch?.sharedTurns]), [[1, 3, 3]], 'one branch at turn 3 from Python');
  assert.match(py.bad ?? '', /--at-turn 9 is past the end of/, 'a bad request from Python carries the same message');

  // Bad requests, before anything starts.
  await assert.rejects(branchRollout(h.client, h.store, { rolloutId: `rollout/${parentBatch}/write-greeting/7`, atTurn: 1, n: 2 }, 'the test server'), (err: Error) => err instanceof BranchError && /no rollout|not found|does not exist/i.test(err.message) && err.message.includes('/7'));
  await assert.rejects(branchRollout(h.client, h.store, { rolloutId: parent.workflowId, atTurn: 5, n: 2 }, 'the test server'), (err: Error) => err instanceof BranchError && /--at-turn 5 is past the end of .*: its attempt 1 has 5 finished turns \(0-4; turn 4 submitted\)\. Fix: branch at a turn from 1 to 4/.test(err.message));
  const elsewhere = new FsTrajectoryStore(mkdtempSync(join(tmpdir(), 'empty-store-')));
  await assert.rejects(branchRollout(h.client, elsewhere, { rolloutId: parent.workflowId, atTurn: 2, n: 2 }, 'the test server'), (err: Error) => err instanceof BranchError && /is not in the trajectory store at .*Fix: point --data-dir or --store at the store its workers used/.test(err.message));
  assert.deepEqual(await h.provider.list(), [], 'every sandbox torn down');
});

test('branching in a group: a tree of rollouts (branch turns 1 and 3, width 2), each branch a child workflow of the rollout it came from, advantages over the group and within each set of siblings', { timeout: 300_000 }, async () => {
  script = 'tree';
  const before = llm.requests.length;
  const batchId = `resume-tree-${Date.now()}`;
  const batch = await submitBatch(h.client, { batchId, taskQueues: h.taskQueues, tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, branching: { atTurns: [1, 3], width: 2 }, policy: { kind: 'openai', baseUrl: llm.baseUrl, model: 'scripted-model', sampling: { seed: 3 } } });
  const groups: GroupResult[] = [];
  for await (const g of batch.results()) groups.push(g);
  const group = groups[0] as GroupResult;
  const byIndex = new Map(group.rollouts.map((r) => [r.index, r]));
  assert.deepEqual([...byIndex.keys()].sort(), [0, 1, 2, 3], 'one root, its branch at turn 1, and a branch of each at turn 3');
  const id = (i: number): string => `rollout/${batchId}/write-greeting/${i}`;
  assert.deepEqual(
    [0, 1, 2, 3].map((i) => byIndex.get(i)?.branch && [byIndex.get(i)?.branch?.parentRolloutId, byIndex.get(i)?.branch?.atTurn, byIndex.get(i)?.branch?.sharedTurns]),
    [undefined, [id(0), 3, 3], [id(0), 1, 1], [id(2), 3, 3]],
  );
  for (const r of group.rollouts) assert.deepEqual([r.turns, r.tokenIntegrity?.status, r.outcomeClass], [5, 'ok', 'ok'], JSON.stringify(r.attemptHistory));
  assert.equal(llm.requests.length - before, 5 + 4 + 2 + 2, 'each turn of the tree asked once: the root 5, the turn-1 branch 4, the turn-3 branches 2 each');
  // Rewards follow the seed's parity at turn 3: indexes 0 and 2 alike, 1 and 3 alike, and the two differ.
  const rewards = [0, 1, 2, 3].map((i) => byIndex.get(i)?.reward);
  assert.ok(rewards[0] === rewards[2] && rewards[1] === rewards[3] && rewards[0] !== rewards[1], `rewards ${JSON.stringify(rewards)}`);
  assert.ok(group.rollouts.every((r) => r.advantage !== null) && group.validCount === 4, 'advantages over the whole group of 4');
  const sets = (i: number): string => JSON.stringify((byIndex.get(i)?.siblingAdvantages ?? []).map((s) => [s.parentRolloutId.slice(-1), s.atTurn, Math.sign(s.advantage ?? NaN)]));
  const [hi, lo] = (rewards[0] ?? 0) > (rewards[1] ?? 0) ? [1, -1] : [-1, 1];
  assert.equal(sets(0), JSON.stringify([['0', 3, hi], ['0', 1, 0]]), 'the root: in its set at turn 3 against branch 1, in its set at turn 1 against branch 2 (same reward)');
  assert.equal(sets(1), JSON.stringify([['0', 3, lo]]));
  assert.equal(sets(2), JSON.stringify([['0', 1, 0], ['2', 3, hi]]));
  assert.equal(sets(3), JSON.stringify([['2', 3, lo]]));
  // The Web UI: the branches are child workflows of the rollout they came from.
  const children = async (i: number): Promise<string[]> =>
    ((await h.client.workflow.getHandle(id(i)).fetchHistory()).events ?? []).flatMap((e) => (e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId ? [e.startChildWorkflowExecutionInitiatedEventAttributes.workflowId] : []));
  assert.deepEqual(await children(0), [id(2), id(1)], 'the root started the turn-1 branch, then the turn-3 one');
  assert.deepEqual(await children(2), [id(3)]);
  const out = join(mkdtempSync(join(tmpdir(), 'tree-export-')), 'samples.jsonl');
  const report = await exportBatch(h.client, h.store, batchId, out);
  assert.equal(report.exported, 4, JSON.stringify(report.excluded));
  const samples = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as TrainingSample);
  const branch3 = samples.find((x) => x.rollout_index === 3);
  assert.deepEqual([branch3?.parent_rollout_id, branch3?.branch_turn, branch3?.sibling_advantages.length], [id(2), 3, 1]);
  assert.deepEqual(await h.provider.list(), [], 'every sandbox torn down');
  await assert.rejects(
    submitBatch(h.client, { batchId: `${batchId}-host`, taskQueues: h.taskQueues, tasks: [join(examples, 'write-greeting')], groupSize: 1, attemptOn: 'host', branching: { atTurns: [1], width: 2 }, policy: { kind: 'scripted', script: 'noop' } }),
    /branching needs attemptOn 'workflow'/,
  );
});
