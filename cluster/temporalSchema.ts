/**
 * Creates Temporal's two databases on a PostgreSQL server and brings their schemas to the
 * server's version, the way an operator does it: `temporal-sql-tool create-database`,
 * `setup-schema -v 0.0`, `update-schema --schema-name postgresql/v12/...` (the schemas are
 * embedded in the tool). Idempotent: an existing database is kept and only updated.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { PERSISTENCE_DATABASE, VISIBILITY_DATABASE, type DatabaseEndpoint } from './serviceConfig.js';

const run = promisify(execFile);

export class TemporalSchemaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemporalSchemaError';
  }
}

const SCHEMAS: Record<string, string> = {
  [PERSISTENCE_DATABASE]: 'postgresql/v12/temporal',
  [VISIBILITY_DATABASE]: 'postgresql/v12/visibility',
};

async function sqlTool(sqlTool: string, database: DatabaseEndpoint, db: string, args: string[]): Promise<string> {
  // The password goes in SQL_PASSWORD (the tool's own variable), not on a command line other users can read.
  const common = ['--plugin', 'postgres12', '--endpoint', database.host, '--port', String(database.port), '--user', database.user, '--database', db];
  try {
    const { stdout, stderr } = await run(sqlTool, [...common, ...args], { timeout: 120_000, env: { ...process.env, SQL_PASSWORD: database.password } });
    return `${stdout}${stderr}`;
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    const detail = `${e.stderr ?? ''}${e.stdout ?? ''}`.trim() || e.message;
    const unreachable = /connection refused|no such host|i\/o timeout|connect:/i.test(detail);
    throw new TemporalSchemaError(
      unreachable
        ? `PostgreSQL at ${database.host}:${database.port} is unreachable from temporal-sql-tool (${args[0]} ${db}): start it or fix the address. ${detail.split('\n').slice(-2).join(' ')}`
        : `temporal-sql-tool ${args.join(' ')} on database ${db} at ${database.host}:${database.port} failed: ${detail.split('\n').slice(-4).join(' ')}`,
    );
  }
}

/** Both databases exist and their schemas are current. */
export async function ensureTemporalSchemas(sqlToolPath: string, database: DatabaseEndpoint): Promise<void> {
  for (const [db, schemaName] of Object.entries(SCHEMAS)) {
    const created = await sqlTool(sqlToolPath, database, db, ['create-database']).then(
      () => true,
      (err: unknown) => {
        if (err instanceof TemporalSchemaError && /already exists/.test(err.message)) return false;
        throw err;
      },
    );
    if (created) await sqlTool(sqlToolPath, database, db, ['setup-schema', '-v', '0.0']);
    await sqlTool(sqlToolPath, database, db, ['update-schema', '--schema-name', schemaName]);
  }
}
