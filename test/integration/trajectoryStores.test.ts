/**
 * The trajectory store suite against both backends — the filesystem and a
 * real PostgreSQL server — plus what only PostgreSQL has: migrations that run
 * once however many workers start at once, the indexes, and a clear error
 * for a server that cannot be reached.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { FsTrajectoryStore } from '../../stores/fsTrajectoryStore.js';
import { MIGRATIONS, PostgresTrajectoryStore } from '../../stores/postgresTrajectoryStore.js';
import { loadTrajectory } from '../../client/loadTrajectory.js';
import { submitBatch } from '../../client/submitBatch.js';
import { janitorScheduleId } from '../../workers/janitorSchedule.js';
import { trajectoryStoreSuite } from '../conformance/trajectoryStoreConformance.js';
import { connectClient, uniqueTaskQueue } from '../helpers/temporal.js';
import { dataDirs, startWorkerProcess } from '../helpers/workerProcess.js';
import { startPostgres, type RunningPostgres } from '../helpers/postgresServer.js';

const scratch = mkdtempSync(join(tmpdir(), 'stores-'));
let postgres: RunningPostgres;

before(async () => {
  postgres = await startPostgres();
});

after(async () => {
  await postgres.stop();
  rmSync(scratch, { recursive: true, force: true });
});

trajectoryStoreSuite('filesystem', async () => new FsTrajectoryStore(join(scratch, 'fs')));
trajectoryStoreSuite('postgresql', async () => PostgresTrajectoryStore.connect(postgres.url));

describe('PostgreSQL store', { timeout: 120_000 }, () => {
  test('eight workers connecting at once migrate the schema exactly once', async () => {
    const url = postgres.url.replace(/\/postgres$/, '/migrations_race');
    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    try {
      await admin.query('CREATE DATABASE migrations_race');
      const stores = await Promise.all(Array.from({ length: 8 }, () => PostgresTrajectoryStore.connect(url)));
      const again = await stores[0]?.migrate();
      assert.deepEqual(again, [], 'nothing left to apply');
      await Promise.all(stores.map((s) => s.close()));
      const db = new pg.Client({ connectionString: url });
      await db.connect();
      try {
        const versions = (await db.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')).rows.map((r) => r.version);
        assert.deepEqual(versions, MIGRATIONS.map((m) => m.version));
        const indexes = (await db.query<{ indexname: string }>("SELECT indexname FROM pg_indexes WHERE tablename = 'rollouts' ORDER BY indexname")).rows.map((r) => r.indexname);
        assert.deepEqual(indexes, ['rollouts_by_batch_task', 'rollouts_by_outcome', 'rollouts_by_task_version', 'rollouts_pkey']);
      } finally {
        await db.end();
      }
    } finally {
      await admin.end();
    }
  });

  test('a rollout worker started with --store postgres://… keeps trajectories and rollout records there, nothing on disk', async () => {
    const prefix = uniqueTaskQueue('pg-store');
    const dirs = dataDirs(scratch, 'pg-worker');
    const worker = startWorkerProcess({ queuePrefix: prefix, hostId: `${prefix}-host`, store: postgres.url, ...dirs });
    const { client, close } = await connectClient();
    const store = await PostgresTrajectoryStore.connect(postgres.url);
    try {
      await worker.ready;
      const batchId = `pg-e2e-${Date.now()}`;
      const batch = await submitBatch(client, {
        batchId,
        taskQueues: { main: prefix, policy: `${prefix}-policy` },
        tasks: [join(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks/fix-median')],
        groupSize: 2,
        policy: { kind: 'scripted', script: 'mixed' },
      });
      for await (const g of batch.results()) assert.equal(g.status, 'complete', g.statusReason);
      const records = await store.queryRollouts({ batchId });
      assert.deepEqual(records.map((r) => [r.taskId, r.result.index, r.result.reward, r.result.outcomeClass]), [['fix-median', 0, 1, 'ok'], ['fix-median', 1, 0, 'ok']]);
      assert.match(records[0]?.taskVersion ?? '', /^[0-9a-f]{64}$/);
      assert.equal(records[0]?.result.experiment?.taskVersion, records[0]?.taskVersion, 'the experiment record is kept');
      const attempts = await loadTrajectory(store, `${batchId}/fix-median/0`);
      assert.equal(attempts.length, 1);
      assert.equal(attempts[0]?.turns.length, 3, 'three turns of conversation and tool output, read back from PostgreSQL');
      assert.equal(existsSync(join(dirs.dataDir, 'trajectories')), false, 'nothing went to the filesystem store');
    } finally {
      worker.kill('SIGTERM');
      await worker.exited;
      await client.schedule.getHandle(janitorScheduleId(`${prefix}-host`)).delete().catch(() => undefined);
      await close();
      await store.close();
    }
  });

  test('an unreachable server is a clear error naming the URL and the fix', async () => {
    await assert.rejects(PostgresTrajectoryStore.connect('postgres://postgres@127.0.0.1:1/nowhere'), /cannot use the PostgreSQL store at postgres:\/\/127\.0\.0\.1:1\/nowhere: .*Fix: check the URL/);
  });
});
