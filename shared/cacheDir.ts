/**
 * Where rollout-pipeline keeps things it builds or fetches once per machine
 * (the Temporal CLI, Node 24): outside the repository, so a fresh clone and a
 * CI run on the same machine reuse them. Same rule as scripts/*.sh.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';

export function rolloutCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.ROLLOUT_CACHE_DIR) return env.ROLLOUT_CACHE_DIR;
  const base = env.XDG_CACHE_HOME ?? join(homedir(), '.cache');
  return join(base, 'rollout-pipeline');
}
