/**
 * What the cluster's PostgreSQL wrote, read before and after a batch: from pg_stat_database,
 * committed transactions and rows inserted + updated + deleted, for the persistence database
 * (`temporal`: histories, mutable state, task queues) and the visibility database; and the WAL
 * position (pg_current_wal_lsn), which moves with every write at once, where the statistics reach
 * pg_stat_database only when each backend flushes them (within about 10 s of going idle in
 * PostgreSQL 15: read them after a pause). Write transactions exactly: WalCommitCounter.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { postgresBinDir } from '../cluster/postgresServer.js';
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
    return {
      commits: persistence.commits,
      tupleWrites: persistence.writes,
      visibilityCommits: visibility.commits,
      visibilityTupleWrites: visibility.writes,
      walBytes: Number(wal.rows[0]?.bytes ?? 0),
    };
  } catch (err) {
    throw new Error(`reading PostgreSQL statistics at ${url} failed: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Keeps WAL segments for pg_waldump (WalCommitCounter): only for a cluster the bench made itself. */
export async function keepWal(url: string, size = '2GB'): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    await client.query(`ALTER SYSTEM SET wal_keep_size = '${size}'`);
    await client.query('SELECT pg_reload_conf()');
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** `X/Y`, PostgreSQL's spelling of a WAL position given in bytes. */
export function lsnOf(bytes: number): string {
  const hi = Math.floor(bytes / 2 ** 32);
  return `${hi.toString(16).toUpperCase()}/${(bytes - hi * 2 ** 32).toString(16).toUpperCase()}`;
}

/**
 * Write transactions, counted exactly: the COMMIT records in the WAL between two positions
 * (pg_waldump --stats=record; a read-only transaction writes none, where pg_stat_database's
 * xact_commit counts reads too). Reads the server's pg_wal directory, so the segments must still be
 * there: the bench sets wal_keep_size on its own throwaway cluster. Null when pg_waldump cannot
 * read the range (its message is kept in `lastError`).
 */
export class WalCommitCounter {
  private position: number | undefined;
  private count = 0;
  lastError: string | undefined;

  constructor(private readonly dataDir: string) {}

  /** Commits from the first position given to `bytes`. */
  advance(bytes: number): number | null {
    if (this.position === undefined || bytes <= this.position) {
      this.position ??= bytes;
      return this.lastError ? null : this.count;
    }
    const r = spawnSync(join(postgresBinDir(), 'pg_waldump'), ['--stats=record', '-p', join(this.dataDir, 'pg_wal'), '-s', lsnOf(this.position), '-e', lsnOf(bytes)], { encoding: 'utf8' });
    const m = /^Transaction\/COMMIT\s+(\d+)/m.exec(r.stdout ?? '');
    // Only the line for COMMIT records is wanted; a range without any has none (0).
    if (r.status !== 0 && !m) this.lastError = `pg_waldump ${lsnOf(this.position)}..${lsnOf(bytes)}: ${(r.stderr || r.error?.message || '').trim().slice(0, 300)}`;
    this.count += Number(m?.[1] ?? 0);
    this.position = bytes;
    return this.lastError ? null : this.count;
  }
}
