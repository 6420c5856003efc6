/**
 * The trajectory store suite against both backends — the filesystem and a
 * real PostgreSQL server — plus what only PostgreSQL has: migrations that run
 * once however many workers start at once, the indexes, and a clear error
 * for a server that cannot be reached.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { FsTrajectoryStore } from '../../activities/store/fsTrajectoryStore.js';
import { MIGRATIONS, PostgresTrajectoryStore } from '../../activities/store/postgresTrajectoryStore.js';
import { trajectoryStoreSuite } from '../conformance/trajectoryStoreConformance.js';
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

  test('an unreachable server is a clear error naming the URL and the fix', async () => {
    await assert.rejects(PostgresTrajectoryStore.connect('postgres://postgres@127.0.0.1:1/nowhere'), /cannot use the PostgreSQL store at postgres:\/\/127\.0\.0\.1:1\/nowhere: .*Fix: check the URL/);
  });
});
