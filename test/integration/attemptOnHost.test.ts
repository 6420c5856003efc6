/**
 * group.attemptOn 'host': each attempt runs as a workflow on its sandbox's host (a child of the
 * rollout on the host's task queue), every policy call, tool call, verdict and teardown a local
 * activity there. The same rollouts end the same way with a fraction of the server round trips; the
 * Temporal UI still shows every call of every turn with its summary; an operator's cancel and a new
 * policy version reach the running attempt. Real dev server, real local sandboxes, a scripted
 * OpenAI endpoint.
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { advancePolicyVersion } from '../../client/policyVersion.js';
import { readRolloutState } from '../../client/show/readRolloutState.js';
import { submitBatch } from '../../client/submitBatch.js';
import { groupWorkflowId, rolloutWorkflowId } from '../../shared/names.js';
import type { GroupResult, RolloutResult } from '../../shared/pipeline.js';
import { localHandle } from '../../shared/sandbox.js';
import { cancelRolloutUpdate, rolloutProgressQuery } from '../../workflows/definitions.js';
import { eventually } from '../helpers/eventually.js';
import { runOneGroup, startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { startScriptedOpenAIServer, type ScriptedOpenAIServer } from '../helpers/scriptedOpenAIServer.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');
const WRITE_GREETING = "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt";
const TURNS = 3;
let h: Harness;
let llm: ScriptedOpenAIServer;
/** Turn 0's command, per test: the first test's is instant, the version test's takes 12 s. */
let turnOneCommand = 'ls /app';

before(async () => {
  h = await startHarness('attempt-on-host');
  llm = await startScriptedOpenAIServer((_req, turn) =>
    turn === 0
      ? { content: 'Looking.', toolCalls: [{ name: 'bash', arguments: { command: turnOneCommand } }] }
      : turn === 1
        ? { content: 'Writing.', toolCalls: [{ name: 'bash', arguments: { command: WRITE_GREETING } }] }
        : { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] },
  );
  await h.startWorkers();
});

after(async () => {
  await llm?.close();
  await h?.close();
});

type Event = temporal.api.history.v1.IHistoryEvent;

interface Counted {
  workflowTasks: number;
  activityTasks: number;
  /** Summaries of the local activity markers, in order. */
  localSummaries: string[];
  /** Summaries of the activity tasks, in order. */
  activitySummaries: string[];
}

const summaryOf = (e: Event): string => (e.userMetadata?.summary ? defaultPayloadConverter.fromPayload<string>(e.userMetadata.summary) : '(none)');

function count(events: Event[]): Counted {
  return {
    workflowTasks: events.filter((e) => e.workflowTaskScheduledEventAttributes).length,
    activityTasks: events.filter((e) => e.activityTaskScheduledEventAttributes).length,
    localSummaries: events.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity').map(summaryOf),
    activitySummaries: events.filter((e) => e.activityTaskScheduledEventAttributes).map(summaryOf),
  };
}

const historyOf = async (workflowId: string): Promise<Event[]> => (await h.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];

test('attempts on their host: the same rollout in a quarter of the server round trips, every policy and tool call still shown with its summary', { timeout: 300_000 }, async () => {
  turnOneCommand = 'ls /app';
  const trips: Record<'workflow' | 'host', number> = { workflow: 0, host: 0 };
  for (const mode of ['workflow', 'host'] as const) {
    const group = await runOneGroup(h, `attempt-${mode}`, { tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, attemptOn: mode, policy: { kind: 'openai', baseUrl: llm.baseUrl, model: 'scripted-model', sampling: { seed: 3 } } });
    const r = group.rollouts[0];
    assert.ok(r);
    assert.deepEqual([r.reward, r.outcomeClass, r.outcomeType, r.attempts, r.turns], [1, 'ok', 'submitted', 1, TURNS], `${mode}: ${JSON.stringify(r.attemptHistory)}`);
    assert.deepEqual(r.policyVersions, [0, 0, 0], `${mode}: every turn's policy version`);
    assert.equal(r.tokenIntegrity?.turns, TURNS, `${mode}: token integrity over the attempt's turns`);
    assert.ok(r.timings.agentMs > 0 && r.timings.verifyMs > 0 && r.timings.teardownMs > 0, `${mode}: stage timings ${JSON.stringify(r.timings)}`);
    const names = await h.store.list(r.trajectoryRef, 'attempt-00/');
    assert.equal(names.filter((n) => n.endsWith('.policy.json')).length, TURNS, `${mode}: one policy record per turn`);
    const parent = await historyOf(r.workflowId);
    const counted = [count(parent)];
    if (mode === 'host') {
      const started = parent.filter((e) => e.startChildWorkflowExecutionInitiatedEventAttributes);
      assert.equal(started.length, 1, 'one attempt workflow');
      const attrs = started[0]?.startChildWorkflowExecutionInitiatedEventAttributes;
      assert.equal(attrs?.workflowType?.name, 'rolloutAttempt');
      assert.match(attrs?.taskQueue?.name ?? '', /host/, 'the attempt runs on the sandbox host queue');
      assert.match(summaryOf(started[0] as Event), /^attempt 1 of rollout 0 on .*: sandbox /, 'the Web UI names the attempt');
      const child = await historyOf(attrs?.workflowId ?? '');
      const inChild = count(child);
      counted.push(inChild);
      assert.deepEqual(
        inChild.localSummaries.map((s) => s.replace(/sandbox \S+$/, 'sandbox <id>')),
        ['turn 0: policy scripted-model', 'turn 0: bash: ls /app', 'turn 1: policy scripted-model', `turn 1: bash: ${WRITE_GREETING}`, 'turn 2: policy scripted-model', 'verify (in-place), then teardown sandbox <id>'],
        'each policy call, tool call and the verdict is a marker the UI shows with its summary',
      );
      assert.deepEqual(inChild.activitySummaries, [], 'no activity task in the attempt');
      assert.deepEqual(count(parent).localSummaries, ['record outcome ok/submitted']);
      assert.deepEqual(count(parent).activitySummaries.map((s) => s.replace(/ .*/, '')), ['provision', 'watch'], 'the rollout provisions and watches the host');
    }
    trips[mode] = counted.reduce((n, c) => n + c.workflowTasks + c.activityTasks, 0);
  }
  process.stdout.write(`server round trips per rollout of ${TURNS} turns: attempt in the workflow ${trips.workflow}, on the host ${trips.host}\n`);
  assert.ok(trips.host <= 8, `at most 8 round trips with the attempt on its host, got ${trips.host}`);
  assert.ok(trips.host * 2 < trips.workflow, `under half the round trips: ${trips.host} against ${trips.workflow}`);
  assert.deepEqual(await h.provider.list(), [], 'every sandbox torn down');
});

test('attempts on their host: a new policy version reaches the running attempt, and an operator cancel stops it and tears its sandbox down', { timeout: 300_000 }, async () => {
  // Longer than the attempt's workflow-task heartbeat (8 s): the signal reaches the attempt at that heartbeat.
  turnOneCommand = 'sleep 12';
  const batchId = `attempt-host-version-${Date.now()}`;
  const batch = await submitBatch(h.client, { batchId, taskQueues: h.taskQueues, tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, attemptOn: 'host', policy: { kind: 'openai', baseUrl: llm.baseUrl, model: 'scripted-model', sampling: { seed: 3 } } });
  const rollout = h.client.workflow.getHandle(rolloutWorkflowId(batchId, 'write-greeting', 0));
  const progress = await eventually(() => rollout.query(rolloutProgressQuery).catch(() => undefined), (p) => p?.attemptWorkflowId !== undefined, 'the attempt workflow started');
  assert.match(progress?.attemptWorkflowId ?? '', /\/attempt-0$/);
  // The attempt's workflow task stays open while its local activities run (queries wait for it, up to its
  // 8 s heartbeat): the trajectory store says when the first turn's answer is in and its 12 s command runs.
  const trajectoryRef = `${batchId}/write-greeting/0`;
  await eventually(async () => (await h.store.list(trajectoryRef, 'attempt-00/').catch(() => [])).filter((n) => n.endsWith('.policy.json')).length, (n) => n >= 1, 'the first turn answered');
  await advancePolicyVersion(h.client, batchId, 1, [groupWorkflowId(batchId, 'write-greeting')]);
  const groups: GroupResult[] = [];
  for await (const g of batch.results()) groups.push(g);
  const r = groups[0]?.rollouts[0];
  assert.deepEqual([r?.reward, r?.outcomeClass, r?.turns], [1, 'ok', TURNS]);
  assert.deepEqual(r?.policyVersions, [0, 1, 1], 'turns after the advance ran under version 1');

  // Cancel: the stalling policy never submits; the cancel reaches the attempt on its host.
  const cancelId = `attempt-host-cancel-${Date.now()}`;
  const stalling = await submitBatch(h.client, { batchId: cancelId, taskQueues: h.taskQueues, tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, attemptOn: 'host', policy: { kind: 'scripted', script: 'stall' }, limits: { maxTurns: 500 } });
  const target = h.client.workflow.getHandle(rolloutWorkflowId(cancelId, 'write-greeting', 0));
  const running = await eventually(() => target.query(rolloutProgressQuery).catch(() => undefined), (p) => p?.attemptWorkflowId !== undefined, 'the stalling attempt started');
  const stallingAttempt = h.client.workflow.getHandle(running?.attemptWorkflowId ?? '');
  await eventually(() => stallingAttempt.query(rolloutProgressQuery).catch(() => undefined), (p) => (p?.turn ?? 0) >= 2, 'the stalling attempt past turn 2');
  // rollout show/status: the rollout's own progress knows no turn; the attempt workflow's does.
  const shown = await readRolloutState(h.client, target.workflowId, 'the test server');
  assert.equal(shown.progress?.attemptWorkflowId, stallingAttempt.workflowId);
  assert.ok((shown.progress?.turn ?? 0) >= 2 && shown.progress?.stage === 'agent', `rollout status shows the attempt's turn: ${JSON.stringify(shown.progress)}`);
  const accepted = await target.executeUpdate(cancelRolloutUpdate, { args: [{ reason: 'operator test: looping on the host' }] });
  assert.equal(accepted.accepted, true);
  const out: GroupResult[] = [];
  for await (const g of stalling.results()) out.push(g);
  const cancelled = out[0]?.rollouts[0] as RolloutResult;
  assert.deepEqual([cancelled.outcomeClass, cancelled.outcomeType, cancelled.reward, cancelled.valid], ['cancelled', 'operator', null, false]);
  assert.equal((await stallingAttempt.describe()).status.name, 'CANCELLED', 'the attempt workflow ended cancelled');
  const markers = count(await historyOf(stallingAttempt.workflowId)).localSummaries;
  assert.match(markers.at(-1) ?? '', /^teardown sandbox /, `the attempt tore its sandbox down last: ${markers.slice(-2).join(' | ')}`);
  assert.deepEqual(await h.provider.list(), [], 'no sandbox left');
});

test('attempts on their host: a sandbox killed mid-turn ends the attempt as infra/sandbox_lost, classified through the attempt workflow, and a fresh attempt is scored', { timeout: 300_000 }, async () => {
  turnOneCommand = 'sleep 20';
  const batchId = `attempt-host-killed-${Date.now()}`;
  const batch = await submitBatch(h.client, { batchId, taskQueues: h.taskQueues, tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, attemptOn: 'host', failurePolicy: { infra: { retries: 1, backoffSec: 1, onExhausted: 'mask' } }, policy: { kind: 'openai', baseUrl: llm.baseUrl, model: 'scripted-model', sampling: { seed: 3 } } });
  const trajectoryRef = `${batchId}/write-greeting/0`;
  await eventually(async () => (await h.store.list(trajectoryRef, 'attempt-00/').catch(() => [])).filter((n) => n.endsWith('.policy.json')).length, (n) => n >= 1, 'the first turn answered');
  await new Promise((r) => setTimeout(r, 1_000));
  turnOneCommand = 'ls /app'; // the fresh attempt's first turn
  const alive = await h.provider.list();
  assert.equal(alive.length, 1, 'one sandbox, in its 20 s command');
  for (const record of alive) if (record.handle) process.kill(localHandle(record.handle).pid, 'SIGKILL');
  const groups: GroupResult[] = [];
  for await (const g of batch.results()) groups.push(g);
  const r = groups[0]?.rollouts[0] as RolloutResult;
  assert.deepEqual([r.reward, r.outcomeClass, r.attempts], [1, 'ok', 2], JSON.stringify(r.attemptHistory));
  assert.equal(`${r.attemptHistory[0]?.outcomeClass}/${r.attemptHistory[0]?.outcomeType}`, 'infra/sandbox_lost', r.attemptHistory[0]?.message);
  assert.equal(r.attemptHistory[0]?.turns, 0, 'the failed attempt had finished no turn');
  assert.deepEqual(await h.provider.list(), [], 'both sandboxes torn down');
});
