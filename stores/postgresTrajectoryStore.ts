/**
 * The PostgreSQL trajectory store, for workers on many machines: the same
 * interface as the filesystem store. Documents are rows keyed (ref, name),
 * written with an upsert so a retried activity rewrites its row instead of
 * adding one; finished rollouts are rows keyed by workflow id with indexed
 * batch / task / outcome columns. The schema is migrated on connect, under an
 * advisory lock, so many workers may start at once.
 */
import pg from 'pg';
import { ClassifiedError } from '../shared/failures.js';
import { compareRolloutRecords, type RolloutQuery, type RolloutRecord, type TrajectoryStore } from './trajectoryStore.js';

/** Ordered schema migrations; each runs once, in a transaction, recorded in schema_migrations. */
export const MIGRATIONS: readonly { version: number; description: string; sql: string }[] = [
  {
    version: 1,
    description: 'trajectory documents and finished rollouts',
    sql: `
      CREATE TABLE trajectory_documents (
        ref        text        NOT NULL,
        name       text        NOT NULL,
        -- json, not jsonb: kept as written, and tool output may hold \\u0000, which jsonb refuses
        body       json        NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (ref, name)
      );
      CREATE TABLE rollouts (
        workflow_id    text             PRIMARY KEY,
        batch_id       text             NOT NULL,
        task_id        text             NOT NULL,
        task_version   text             NOT NULL,
        rollout_index  integer          NOT NULL,
        outcome_class  text             NOT NULL,
        outcome_type   text             NOT NULL,
        reward         double precision,
        valid          boolean          NOT NULL,
        attempts       integer          NOT NULL,
        turns          integer          NOT NULL,
        trajectory_ref text             NOT NULL,
        experiment     jsonb,
        record         json             NOT NULL,
        recorded_at    timestamptz      NOT NULL DEFAULT now()
      );
      CREATE INDEX rollouts_by_batch_task ON rollouts (batch_id, task_id, rollout_index);
      CREATE INDEX rollouts_by_task_version ON rollouts (task_id, task_version);
      CREATE INDEX rollouts_by_outcome ON rollouts (batch_id, outcome_class, outcome_type);
    `,
  },
];

/** Any 64-bit number of ours: serializes concurrent migrations across workers. */
const MIGRATION_LOCK = 7_262_001;

function storageError(what: string, err: unknown): ClassifiedError<'infra'> {
  return new ClassifiedError('infra', 'storage_error', `trajectory store (PostgreSQL): ${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}

export class PostgresTrajectoryStore implements TrajectoryStore {
  private constructor(
    private readonly pool: pg.Pool,
    private readonly where: string,
  ) {}

  /** Connects, migrates the schema to the latest version, and returns the store. */
  static async connect(connectionString: string, options: { maxConnections?: number } = {}): Promise<PostgresTrajectoryStore> {
    const pool = new pg.Pool({ connectionString, max: options.maxConnections ?? 10 });
    pool.on('error', () => undefined); // an idle client lost its connection; the next query reconnects
    const url = new URL(connectionString);
    const store = new PostgresTrajectoryStore(pool, `${url.protocol}//${url.host}${url.pathname}`);
    try {
      await store.migrate();
    } catch (err) {
      await pool.end();
      throw new Error(
        `cannot use the PostgreSQL store at ${store.where}: ${err instanceof Error ? err.message : String(err)}. Fix: check the URL (postgres://user:password@host:port/database), that the server runs, and that the user may create tables`,
        { cause: err },
      );
    }
    return store;
  }

  /** Applies the migrations not yet applied; returns the versions applied now. */
  async migrate(): Promise<number[]> {
    const client = await this.pool.connect();
    const applied: number[] = [];
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())');
      const done = new Set((await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
      for (const m of MIGRATIONS) {
        if (done.has(m.version)) continue;
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (version, description) VALUES ($1, $2)', [m.version, m.description]);
        applied.push(m.version);
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
    return applied;
  }

  locate(ref: string): string {
    return `${this.where} trajectory_documents where ref = '${ref}'`;
  }

  async put(ref: string, name: string, value: unknown): Promise<void> {
    try {
      await this.pool.query(
        `INSERT INTO trajectory_documents (ref, name, body) VALUES ($1, $2, $3::json)
         ON CONFLICT (ref, name) DO UPDATE SET body = EXCLUDED.body, updated_at = now()`,
        [ref, name, JSON.stringify(value)],
      );
    } catch (err) {
      throw storageError(`cannot write ${ref}/${name}`, err);
    }
  }

  async get<T>(ref: string, name: string): Promise<T | undefined> {
    try {
      // body::text: the document exactly as written, parsed here (pg would parse json columns itself)
      const r = await this.pool.query<{ body: string }>('SELECT body::text AS body FROM trajectory_documents WHERE ref = $1 AND name = $2', [ref, name]);
      const row = r.rows[0];
      return row ? (JSON.parse(row.body) as T) : undefined;
    } catch (err) {
      throw storageError(`cannot read ${ref}/${name}`, err);
    }
  }

  async list(ref: string, prefix = ''): Promise<string[]> {
    // Same semantics as the filesystem store: names directly under the prefix's folder, no deeper.
    const folder = prefix.slice(0, prefix.lastIndexOf('/') + 1);
    try {
      const r = await this.pool.query<{ name: string }>("SELECT name FROM trajectory_documents WHERE ref = $1 AND starts_with(name, $2)", [ref, prefix]);
      return r.rows
        .map((row) => row.name)
        .filter((n) => !n.slice(folder.length).includes('/'))
        .sort();
    } catch (err) {
      throw storageError(`cannot list ${ref}/${prefix}`, err);
    }
  }

  async putRollout(record: RolloutRecord): Promise<void> {
    const r = record.result;
    try {
      await this.pool.query(
        `INSERT INTO rollouts (workflow_id, batch_id, task_id, task_version, rollout_index, outcome_class, outcome_type, reward, valid, attempts, turns, trajectory_ref, experiment, record)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::jsonb, $14::json)
         ON CONFLICT (workflow_id) DO UPDATE SET
           batch_id = EXCLUDED.batch_id, task_id = EXCLUDED.task_id, task_version = EXCLUDED.task_version, rollout_index = EXCLUDED.rollout_index,
           outcome_class = EXCLUDED.outcome_class, outcome_type = EXCLUDED.outcome_type, reward = EXCLUDED.reward, valid = EXCLUDED.valid,
           attempts = EXCLUDED.attempts, turns = EXCLUDED.turns, trajectory_ref = EXCLUDED.trajectory_ref, experiment = EXCLUDED.experiment,
           record = EXCLUDED.record, recorded_at = now()`,
        [
          r.workflowId,
          record.batchId,
          record.taskId,
          record.taskVersion,
          r.index,
          r.outcomeClass,
          r.outcomeType,
          r.reward,
          r.valid,
          r.attempts,
          r.turns,
          r.trajectoryRef,
          r.experiment === null ? null : JSON.stringify(r.experiment),
          JSON.stringify(record),
        ],
      );
    } catch (err) {
      throw storageError(`cannot record rollout ${r.workflowId}`, err);
    }
  }

  async queryRollouts(query: RolloutQuery): Promise<RolloutRecord[]> {
    const conditions: string[] = [];
    const values: string[] = [];
    for (const [column, value] of [['batch_id', query.batchId], ['task_id', query.taskId], ['outcome_class', query.outcomeClass]] as const) {
      if (value === undefined) continue;
      values.push(value);
      conditions.push(`${column} = $${values.length}`);
    }
    try {
      const r = await this.pool.query<{ record: string }>(
        `SELECT record::text AS record FROM rollouts ${conditions.length ? `WHERE ${conditions.join(' AND ')}` : ''} ORDER BY batch_id, task_id, rollout_index`,
        values,
      );
      return r.rows.map((row) => JSON.parse(row.record) as RolloutRecord).sort(compareRolloutRecords);
    } catch (err) {
      throw storageError('cannot query rollouts', err);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
