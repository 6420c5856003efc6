/**
 * What the cluster's PostgreSQL wrote, read before and after a batch: from pg_stat_database,
 * committed transactions and rows inserted + updated + deleted, for the persistence database
 * (`temporal`: histories, mutable state, task queues) and the visibility database; and the WAL
 * position (pg_current_wal_lsn), which moves with every write at once, where the statistics reach
 * pg_stat_database only when each backend flushes them (within about 10 s of going idle in
 * PostgreSQL 15: read them after a pause).
 */
import pg from 'pg';
import { PERSISTENCE_DATABASE, VISIBILITY_DATABASE } from '../cluster/serviceConfig.js';

export type DbCounters = {
  commits: number;
  tupleWrites: number;
  visibilityCommits: number;
  visibilityTupleWrites: number;
  walBytes: number;
};

export async function readDbCounters(url: string): Promise<DbCounters> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    const stats = await client.query<{ datname: string; commits: string; writes: string }>(
      'SELECT datname, xact_commit::text AS commits, (tup_inserted + tup_updated + tup_deleted)::text AS writes FROM pg_stat_database WHERE datname = ANY($1)',
      [[PERSISTENCE_DATABASE, VISIBILITY_DATABASE]],
    );
    const wal = await client.query<{ bytes: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS bytes");
    const of = (db: string): { commits: number; writes: number } => {
      const row = stats.rows.find((r) => r.datname === db);
      if (!row) throw new Error(`no database ${db} in pg_stat_database at ${url}: was the cluster's schema created (cluster/temporalSchema.ts)?`);
      return { commits: Number(row.commits), writes: Number(row.writes) };
    };
    const persistence = of(PERSISTENCE_DATABASE);
    const visibility = of(VISIBILITY_DATABASE);
    return { commits: persistence.commits, tupleWrites: persistence.writes, visibilityCommits: visibility.commits, visibilityTupleWrites: visibility.writes, walBytes: Number(wal.rows[0]?.bytes ?? 0) };
  } catch (err) {
    throw new Error(`reading PostgreSQL statistics at ${url} failed: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export function dbDelta(after: DbCounters, before: DbCounters): DbCounters {
  const out = { ...after };
  for (const k of Object.keys(out) as (keyof DbCounters)[]) out[k] = after[k] - before[k];
  return out;
}
