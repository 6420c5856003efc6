/**
 * group.policyCalls 'local': each turn's policy call runs as a local activity of the rollout's
 * workflow worker, a marker in the history, instead of an activity on the policy queue. The same
 * rollouts end the same way with fewer server round trips, and the Temporal UI still shows every
 * policy call with its summary. The record of a finished rollout is a local activity in both modes.
 * Real dev server, real local sandboxes, a scripted OpenAI endpoint.
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { runOneGroup, startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { startScriptedOpenAIServer, type ScriptedOpenAIServer } from '../helpers/scriptedOpenAIServer.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');
const TURNS = 3;
let h: Harness;
let llm: ScriptedOpenAIServer;

before(async () => {
  h = await startHarness('local-policy');
  llm = await startScriptedOpenAIServer((_req, turn) =>
    turn === 0
      ? { content: 'Looking.', toolCalls: [{ name: 'bash', arguments: { command: 'ls /app' } }] }
      : turn === 1
        ? { content: 'Writing.', toolCalls: [{ name: 'bash', arguments: { command: "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt" } }] }
        : { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] },
  );
  await h.startWorkers();
});

after(async () => {
  await llm?.close();
  await h?.close();
});

interface Counted {
  workflowTasks: number;
  activityTasks: number;
  policyActivities: number;
  /** Summaries of the local activity markers, in order. */
  localSummaries: string[];
}

function count(events: temporal.api.history.v1.IHistoryEvent[]): Counted {
  const summary = (e: temporal.api.history.v1.IHistoryEvent): string => (e.userMetadata?.summary ? defaultPayloadConverter.fromPayload<string>(e.userMetadata.summary) : '(none)');
  return {
    workflowTasks: events.filter((e) => e.workflowTaskScheduledEventAttributes).length,
    activityTasks: events.filter((e) => e.activityTaskScheduledEventAttributes).length,
    policyActivities: events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'policyStep').length,
    localSummaries: events.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity').map(summary),
  };
}

test('policy calls as local activities: the same rollout, two server round trips fewer per turn, every policy call still shown with its summary', { timeout: 300_000 }, async () => {
  const counted: Record<'queue' | 'local', Counted> = {} as Record<'queue' | 'local', Counted>;
  for (const mode of ['queue', 'local'] as const) {
    const group = await runOneGroup(h, `policy-${mode}`, { tasks: [join(examples, 'write-greeting')], groupSize: 1, minValid: 1, policyCalls: mode, policy: { kind: 'openai', baseUrl: llm.baseUrl, model: 'scripted-model', sampling: { seed: 3 } } });
    const r = group.rollouts[0];
    assert.ok(r);
    assert.deepEqual([r.reward, r.outcomeClass, r.outcomeType, r.attempts, r.turns], [1, 'ok', 'submitted', 1, TURNS], `${mode}: ${JSON.stringify(r.attemptHistory)}`);
    const names = await h.store.list(r.trajectoryRef, 'attempt-00/');
    assert.equal(names.filter((n) => n.endsWith('.policy.json')).length, TURNS, `${mode}: one policy record per turn`);
    const history = await h.client.workflow.getHandle(r.workflowId).fetchHistory();
    counted[mode] = count(history.events ?? []);
  }
  const { queue, local } = counted;
  process.stdout.write(`round trips per rollout of ${TURNS} turns: queue ${queue.workflowTasks} workflow tasks + ${queue.activityTasks} activity tasks; local ${local.workflowTasks} + ${local.activityTasks}\n`);
  assert.equal(queue.policyActivities, TURNS, 'queue mode: one policy activity per turn');
  assert.deepEqual(queue.localSummaries, ['record outcome ok/submitted'], 'queue mode: only the record is a local activity');
  assert.equal(local.policyActivities, 0, 'local mode: no policy activity task');
  assert.deepEqual(
    local.localSummaries,
    [...Array.from({ length: TURNS }, (_, turn) => `turn ${turn}: policy scripted-model`), 'record outcome ok/submitted'],
    'each policy call is a marker the UI shows with its summary',
  );
  assert.equal(local.activityTasks, queue.activityTasks - TURNS, 'one activity task fewer per turn');
  assert.ok(local.workflowTasks <= queue.workflowTasks - TURNS, `at least one workflow task fewer per turn: ${local.workflowTasks} against ${queue.workflowTasks}`);
});
