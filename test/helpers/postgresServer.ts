/**
 * A throwaway PostgreSQL server for one test file (cluster/postgresServer.ts): its own temp
 * directory, a free localhost port, removed on stop.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PostgresServer } from '../../cluster/postgresServer.js';
import { freePort } from '../../servers/temporalDevServer.js';

export interface RunningPostgres {
  url: string;
  stop(): Promise<void>;
}

export async function startPostgres(): Promise<RunningPostgres> {
  const server = new PostgresServer({ dir: mkdtempSync(join(tmpdir(), 'rollout-pg-')), host: '127.0.0.1', port: await freePort() });
  await server.start();
  return { url: server.url, stop: () => server.destroy() };
}
