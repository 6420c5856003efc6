/**
 * Bad input through the real pipeline: each gets a clear error or a typed
 * model failure, and what was already done is kept. Requests reach the group
 * workflow by name with plain JSON (as the Python trainer sends them), and
 * policies misbehave through a scripted OpenAI-compatible endpoint.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { policyName, toolName, type PolicyTurnRecord, type ToolTurnRecord } from '../../agent/conversation.js';
import { submitBatch } from '../../client/submitBatch.js';
import { groupWorkflowId, rolloutWorkflowId } from '../../shared/names.js';
import type { GroupResult, RolloutResult } from '../../shared/pipeline.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { startScriptedOpenAIServer, type Script } from '../helpers/scriptedOpenAIServer.js';

const greetingTask = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks/write-greeting');
const WRITE_GREETING = "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt";
const scratch = mkdtempSync(join(tmpdir(), 'bad-input-'));
let h: Harness;

before(async () => {
  h = await startHarness('bad-input');
  await h.startWorkers();
});

after(async () => {
  await h.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** Starts rolloutGroup by name with plain JSON, as a client in another language would. */
async function startByName(batchId: string, request: Record<string, unknown>): Promise<ReturnType<Harness['client']['workflow']['getHandle']>> {
  return h.client.workflow.start('rolloutGroup', {
    workflowId: groupWorkflowId(batchId, 'write-greeting'),
    taskQueue: h.taskQueues.main,
    args: [{ batchId, task: { dir: greetingTask }, groupSize: 2, policy: { kind: 'scripted', script: 'noop' }, taskQueues: h.taskQueues, ...request }],
  });
}

async function rejectedWith(batchId: string, request: Record<string, unknown>, message: RegExp): Promise<void> {
  const handle = await startByName(batchId, request);
  await assert.rejects(handle.result(), (err: unknown) => {
    assert.ok(err instanceof WorkflowFailedError);
    assert.ok(err.cause instanceof ApplicationFailure);
    assert.equal(err.cause.type, 'BadGroupInput');
    assert.match(err.cause.message, message);
    return true;
  });
  await assert.rejects(h.client.workflow.getHandle(rolloutWorkflowId(batchId, 'write-greeting', 0)).describe(), WorkflowNotFoundError, 'no rollout was started');
}

async function oneRollout(batchId: string, script: Script, limits: Record<string, number> = {}): Promise<{ rollout: RolloutResult; group: GroupResult }> {
  const llm = await startScriptedOpenAIServer(script);
  try {
    const batch = await submitBatch(h.client, {
      batchId,
      taskQueues: h.taskQueues,
      tasks: [greetingTask],
      groupSize: 1,
      minValid: 1,
      policy: { kind: 'openai', baseUrl: llm.baseUrl, model: 'bad-input-model' },
      limits,
    });
    for await (const group of batch.results()) return { group, rollout: group.rollouts[0] as RolloutResult };
    throw new Error('no group result');
  } finally {
    await llm.close();
  }
}

describe('bad input', { timeout: 600_000 }, () => {
  test('a group size of 0 or 10,000 sent by name is refused by the workflow with the field and the fix; no rollout starts', async () => {
    await rejectedWith(`bad-size-0-${Date.now()}`, { groupSize: 0 }, /groupSize: a group needs at least 1 rollout/);
    await rejectedWith(`bad-size-10000-${Date.now()}`, { groupSize: 10_000 }, /groupSize: at most 1024 rollouts per group: .*use several groups or batches/);
  });

  test('an unknown policy kind sent by name is refused, naming the field', async () => {
    await rejectedWith(`bad-policy-${Date.now()}`, { policy: { kind: 'magic' } }, /rolloutGroup input: policy\.kind: Invalid discriminator value\. Expected 'scripted' \| 'openai'/);
  });

  test('a malformed task spec ends the group task_invalid with the file and the problem, never retried', async () => {
    const task = join(scratch, 'broken-task');
    cpSync(greetingTask, task, { recursive: true });
    writeFileSync(join(task, 'task.toml'), 'version = "1.0"\n[verifier]\ntimeout_sec = "soon"\n');
    const batchId = `bad-task-${Date.now()}`;
    const handle = await h.client.workflow.start('rolloutGroup', {
      workflowId: groupWorkflowId(batchId, 'broken-task'),
      taskQueue: h.taskQueues.main,
      args: [{ batchId, task: { dir: task }, groupSize: 2, policy: { kind: 'scripted', script: 'noop' }, taskQueues: h.taskQueues }],
    });
    const group = (await handle.result()) as GroupResult;
    assert.equal(group.status, 'task_invalid');
    assert.match(group.statusReason, /task\.toml/);
    assert.match(group.statusReason, /\[verifier\]\.timeout_sec: .*Fix: give seconds as a positive number/);
    assert.deepEqual(group.rollouts, []);
    const started = (await handle.fetchHistory()).events?.filter((e) => e.activityTaskStartedEventAttributes) ?? [];
    assert.deepEqual(started.map((e) => e.activityTaskStartedEventAttributes?.attempt), [1], 'the task check ran once, not retried');
  });

  test('tool calls with invalid JSON are shown to the model as errors, then end the loop as model/malformed_tool_call; the work already done is verified and kept', async () => {
    const { rollout } = await oneRollout(`bad-json-${Date.now()}`, (_req, turn) =>
      turn === 0 ? { toolCalls: [{ name: 'bash', arguments: { command: WRITE_GREETING } }] } : { content: 'oops', toolCalls: [{ name: 'bash', arguments: '{"command": "ls' }] },
    );
    assert.deepEqual([rollout.outcomeClass, rollout.outcomeType, rollout.attempts, rollout.turns], ['model', 'malformed_tool_call', 1, 4]);
    assert.equal(rollout.reward, 1, 'the greeting written in turn 0 is still verified and scored');
    assert.equal(rollout.valid, true);
    const first = await h.store.get<ToolTurnRecord>(rollout.trajectoryRef, toolName(0, 0, 0));
    assert.equal(first?.exitCode, 0, 'turn 0 kept in the trajectory');
    const bad = await h.store.get<ToolTurnRecord>(rollout.trajectoryRef, toolName(0, 1, 0));
    assert.equal(bad?.malformed, true);
    assert.match(bad?.observation ?? '', /^error: .*JSON/i);
    const third = await h.store.get<PolicyTurnRecord>(rollout.trajectoryRef, policyName(0, 3));
    assert.ok(third, 'every malformed turn is recorded');
  });

  test('oversized and non-UTF-8 tool output reach the model truncated with a note and as valid text; the rollout goes on', async () => {
    const { rollout } = await oneRollout(`bad-output-${Date.now()}`, (_req, turn) => {
      if (turn === 0) return { toolCalls: [{ name: 'bash', arguments: { command: "head -c 5000000 /dev/zero | tr '\\0' a" } }] };
      if (turn === 1) return { toolCalls: [{ name: 'bash', arguments: { command: `printf 'bytes: \\xff\\xfe\\xc3(\\n'; ${WRITE_GREETING}` } }] };
      return { toolCalls: [{ name: 'submit', arguments: {} }] };
    }, { maxOutputBytes: 4096 });
    assert.deepEqual([rollout.reward, rollout.outcomeClass, rollout.attempts], [1, 'ok', 1]);
    const big = await h.store.get<ToolTurnRecord>(rollout.trajectoryRef, toolName(0, 0, 0));
    assert.equal(big?.truncated, true);
    assert.ok((big?.observation.length ?? Infinity) < 4096 + 500, `observation capped (${big?.observation.length} chars)`);
    assert.match(big?.observation ?? '', /\[output truncated: 5000000 bytes in total, the first 4096 kept\]/);
    const binary = await h.store.get<ToolTurnRecord>(rollout.trajectoryRef, toolName(0, 1, 0));
    assert.equal(binary?.exitCode, 0);
    assert.match(binary?.observation ?? '', /bytes: \uFFFD\uFFFD\uFFFD\(/);
  });
});
