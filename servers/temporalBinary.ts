/**
 * Finds a working `temporal` CLI without downloading anything.
 *
 * Order: TEMPORAL_CLI_PATH (explicit), a `temporal` on PATH (e.g. brew install
 * temporal), then the copy that scripts/ensure-temporal.sh builds into the
 * cache. A missing or broken binary is a TemporalBinaryError whose message says
 * what to install; callers print it without a stack trace.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { rolloutCacheDir } from '../shared/cacheDir.js';

const execFileAsync = promisify(execFile);

/** The CLI release we build from Go modules (its go.mod has no replace directives). */
export const TEMPORAL_CLI_VERSION = '1.5.1';

export const HOW_TO_GET_TEMPORAL =
  'Install the Temporal CLI: run `bash scripts/ensure-temporal.sh` (builds it with ' +
  `\`go install github.com/temporalio/cli/cmd/temporal@v${TEMPORAL_CLI_VERSION}\` into the cache; needs Go), ` +
  'or `brew install temporal`, or point TEMPORAL_CLI_PATH at an existing `temporal` binary.';

export class TemporalBinaryError extends Error {
  constructor(message: string) {
    super(`${message}\n${HOW_TO_GET_TEMPORAL}`);
    this.name = 'TemporalBinaryError';
  }
}

export interface TemporalBinary {
  path: string;
  /** As printed by `temporal --version`, e.g. "1.5.1 (Server 1.29.1, UI 2.42.1)". */
  version: string;
  /** Where the path came from: env, PATH or cache. */
  source: 'env' | 'path' | 'cache';
}

export function cachedTemporalPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(rolloutCacheDir(env), `temporal-v${TEMPORAL_CLI_VERSION}`, 'temporal');
}

function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function findOnPath(name: string, env: NodeJS.ProcessEnv): string | undefined {
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

/** Runs `<path> --version` and checks that it is the Temporal CLI. */
export async function probeTemporalBinary(path: string, source: TemporalBinary['source']): Promise<TemporalBinary> {
  if (!isExecutableFile(path)) {
    throw new TemporalBinaryError(`No executable Temporal CLI at ${path} (from ${source}).`);
  }
  let stdout: string;
  try {
    // A generous limit: the binary is large, and a loaded machine took more than 15 s to start it.
    ({ stdout } = await execFileAsync(path, ['--version'], { timeout: 60_000 }));
  } catch (err) {
    const reason = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new TemporalBinaryError(`${path} (from ${source}) does not run as the Temporal CLI: ${reason}.`);
  }
  const match = /temporal version (.+)/.exec(stdout);
  if (!match?.[1]) {
    throw new TemporalBinaryError(
      `${path} (from ${source}) is not the Temporal CLI: \`--version\` printed ${JSON.stringify(stdout.trim().slice(0, 200))}.`,
    );
  }
  return { path, version: match[1], source };
}

export async function resolveTemporalBinary(env: NodeJS.ProcessEnv = process.env): Promise<TemporalBinary> {
  if (env.TEMPORAL_CLI_PATH) return probeTemporalBinary(env.TEMPORAL_CLI_PATH, 'env');
  const onPath = findOnPath('temporal', env);
  if (onPath) return probeTemporalBinary(onPath, 'path');
  const cached = cachedTemporalPath(env);
  if (isExecutableFile(cached)) return probeTemporalBinary(cached, 'cache');
  throw new TemporalBinaryError(`No Temporal CLI found: TEMPORAL_CLI_PATH is unset, none on PATH, none at ${cached}.`);
}
