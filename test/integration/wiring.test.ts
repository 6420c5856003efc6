/**
 * Proves the wiring on the real Temporal dev server: a worker runs a workflow
 * that calls an activity, the workflow is queried while it runs, and its
 * history replays through Worker.runReplayHistory (and fails to replay against
 * an incompatible change).
 */
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { DeterminismViolationError } from '@temporalio/workflow';
import { Worker, type NativeConnection } from '@temporalio/worker';
import { createWiringActivities } from '../fixtures/activities/wiring.js';
import { releaseSignal, wiringProbe, wiringStateQuery, type WiringState } from '../fixtures/workflows/wiring.js';
import { connectClient, connectWorker, uniqueTaskQueue } from '../helpers/temporal.js';

const here = dirname(fileURLToPath(import.meta.url));
const workflowsPath = join(here, '../fixtures/workflows/wiring.ts');
const changedWorkflowsPath = join(here, '../fixtures/workflows/wiringChanged.ts');

let client: Client;
let closeClient: () => Promise<void>;
let workerConnection: NativeConnection;

before(async () => {
  ({ client, close: closeClient } = await connectClient());
  workerConnection = await connectWorker();
});

after(async () => {
  await closeClient();
  await workerConnection.close();
});

async function pollQuery<T>(read: () => Promise<T>, until: (value: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (until(value)) return value;
    if (Date.now() > deadline) throw new Error(`query never satisfied; last value ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('a workflow calls an activity, answers a query while running, and replays', { timeout: 120_000 }, async () => {
  const taskQueue = uniqueTaskQueue('wiring');
  const worker = await Worker.create({
    connection: workerConnection,
    taskQueue,
    workflowsPath,
    activities: createWiringActivities(),
  });

  const workflowId = `wiring-${taskQueue}`;
  const result = await worker.runUntil(async () => {
    const handle = await client.workflow.start(wiringProbe, { taskQueue, workflowId, args: ['hello temporal'] });

    const running = await pollQuery<WiringState>(
      () => handle.query(wiringStateQuery),
      (s) => s.stage === 'waiting-for-release',
    );
    assert.equal(running.measurement?.length, 'hello temporal'.length);
    assert.equal(running.measurement?.upper, 'HELLO TEMPORAL');
    assert.equal((await handle.describe()).status.name, 'RUNNING');

    await handle.signal(releaseSignal);
    return handle.result();
  });
  assert.equal(result, 'HELLO TEMPORAL:14');

  const handle = client.workflow.getHandle(workflowId);
  const history = await handle.fetchHistory();
  const eventTypes = (history.events ?? []).map((e) => e.eventType);
  assert.ok(eventTypes.length > 0, 'history has events');

  // The same code replays its own history without complaint.
  await Worker.runReplayHistory({ workflowsPath }, history, workflowId);

  // An incompatible change to the workflow is caught by replay.
  await assert.rejects(
    Worker.runReplayHistory({ workflowsPath: changedWorkflowsPath }, history, workflowId),
    (err: unknown) => err instanceof DeterminismViolationError,
  );
});
