/**
 * The dev-server script as operators use it: our search attributes are
 * registered and queryable, --db-filename keeps workflows across a restart,
 * and stop() leaves no process behind.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { ROLLOUT_ATTEMPTS, ROLLOUT_BATCH, ROLLOUT_REWARD, ROLLOUT_SEARCH_ATTRIBUTES } from '../../shared/searchAttributes.js';
import { startDevServer } from '../../servers/temporalDevServer.js';
import { eventually } from '../helpers/eventually.js';

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function withClient<T>(address: string, fn: (client: Client, connection: Connection) => Promise<T>): Promise<T> {
  const connection = await Connection.connect({ address });
  try {
    return await fn(new Client({ connection }), connection);
  } finally {
    await connection.close();
  }
}


test('search attributes are registered, state survives a restart with --db-filename, stop leaves nothing', { timeout: 180_000 }, async () => {
  const dbFilename = join(mkdtempSync(join(tmpdir(), 'temporal-db-')), 'temporal.sqlite');
  const first = await startDevServer({ dbFilename, uiPort: false });
  const port = Number(first.address.split(':')[1]);
  const workflowId = `persisted-${Date.now()}`;
  const batch = `batch-${Date.now()}`;

  try {
    await withClient(first.address, async (client, connection) => {
      const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
      for (const key of ROLLOUT_SEARCH_ATTRIBUTES) {
        assert.ok(customAttributes && key.name in customAttributes, `${key.name} is registered`);
      }
      // No worker polls this queue: the workflow stays open, which is what must survive the restart.
      await client.workflow.start('nobodyRunsThis', {
        taskQueue: 'no-worker-here',
        workflowId,
        typedSearchAttributes: new TypedSearchAttributes([
          { key: ROLLOUT_BATCH, value: batch },
          { key: ROLLOUT_ATTEMPTS, value: 2 },
          { key: ROLLOUT_REWARD, value: 0.5 },
        ]),
      });
    });
  } finally {
    await first.stop();
  }
  assert.equal(isAlive(first.pid), false, 'the first server process is gone after stop()');

  const second = await startDevServer({ dbFilename, port, uiPort: false });
  try {
    await withClient(second.address, async (client) => {
      const description = await client.workflow.getHandle(workflowId).describe();
      assert.equal(description.status.name, 'RUNNING');
      assert.equal(description.typedSearchAttributes.get(ROLLOUT_BATCH), batch);

      const found = await eventually(
        async () => {
          const ids: string[] = [];
          for await (const wf of client.workflow.list({ query: `RolloutBatch="${batch}" AND RolloutAttempts=2` })) ids.push(wf.workflowId);
          return ids;
        },
        (ids) => ids.length === 1,
        'visibility query by RolloutBatch',
      );
      assert.deepEqual(found, [workflowId]);
      await client.workflow.getHandle(workflowId).terminate('test done');
    });
  } finally {
    await second.stop();
  }
  assert.equal(isAlive(second.pid), false, 'the second server process is gone after stop()');
});
