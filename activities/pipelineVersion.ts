/**
 * The pipeline version recorded with every rollout: package version plus the
 * git commit when known. In a checkout the commit comes from git; an image has
 * no .git, so its build records the commit in ROLLOUT_PIPELINE_COMMIT
 * (deploy/Dockerfile, build argument GIT_COMMIT).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

export function pipelineVersion(): string {
  if (cached) return cached;
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['-C', root, 'rev-parse', '--short=12', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['-C', root, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    if (dirty) commit += '+dirty';
  } catch {
    // not a git checkout (an image): the commit its build recorded, else the package version alone
    const recorded = process.env.ROLLOUT_PIPELINE_COMMIT?.trim();
    if (commit === 'unknown' && recorded && recorded !== 'unknown') commit = recorded;
  }
  cached = `${version}+${commit}`;
  return cached;
}
