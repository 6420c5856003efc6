/**
 * Where the real Temporal server's binaries are: `temporal-server` (every service) and
 * `temporal-sql-tool` (database and schemas), built once per version by
 * scripts/ensure-temporal-server.sh into the cache outside the repository, or named by
 * TEMPORAL_SERVER_DIR. Nothing here downloads or builds.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { rolloutCacheDir } from '../shared/cacheDir.js';

export const TEMPORAL_SERVER_VERSION = '1.31.2';

const HOW_TO_BUILD =
  'build it with `bash scripts/ensure-temporal-server.sh` (or `bash scripts/setup.sh cluster`), or set TEMPORAL_SERVER_DIR to a directory holding temporal-server and temporal-sql-tool';

export class TemporalServerBinaryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemporalServerBinaryError';
  }
}

export interface TemporalServerBinaries {
  server: string;
  sqlTool: string;
  /** The version the server binary reports. */
  version: string;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The binaries of TEMPORAL_SERVER_DIR, else of the cache; a clear error when either is missing or does not run. */
export function resolveTemporalServer(env: NodeJS.ProcessEnv = process.env): TemporalServerBinaries {
  const fromEnv = env.TEMPORAL_SERVER_DIR;
  const dir = fromEnv || join(rolloutCacheDir(env), `temporal-server-v${TEMPORAL_SERVER_VERSION}`);
  const where = fromEnv ? `TEMPORAL_SERVER_DIR=${fromEnv}` : dir;
  const server = join(dir, 'temporal-server');
  const sqlTool = join(dir, 'temporal-sql-tool');
  for (const path of [server, sqlTool]) {
    if (!executable(path)) throw new TemporalServerBinaryError(`no executable ${path.slice(dir.length + 1)} in ${where}: ${HOW_TO_BUILD}`);
  }
  const probe = spawnSync(server, ['--version'], { encoding: 'utf8', timeout: 30_000 });
  const out = `${probe.stdout ?? ''}${probe.stderr ?? ''}`.trim();
  const version = /(\d+\.\d+\.\d+)/.exec(out)?.[1];
  if (probe.status !== 0 || !version) {
    throw new TemporalServerBinaryError(`${server} does not run as the Temporal server (\`--version\` gave ${probe.error ? probe.error.message : JSON.stringify(out.slice(0, 200))}): ${HOW_TO_BUILD}`);
  }
  return { server, sqlTool, version };
}
