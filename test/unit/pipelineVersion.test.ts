/**
 * The pipeline version in every experiment record: the git commit in a
 * checkout, the commit the image build recorded (ROLLOUT_PIPELINE_COMMIT)
 * where there is no git, as in the worker image.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const { version } = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { version: string };

/** pipelineVersion() in a fresh process with exactly this environment. */
function versionWith(env: Record<string, string>): string {
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', "const { pipelineVersion } = await import('./activities/pipelineVersion.ts'); process.stdout.write(pipelineVersion());"], {
    cwd: root,
    env,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

// No git on PATH: what the image sees (git is not installed there).
const noGit = { PATH: dirname(process.execPath) };

test('without git, the commit comes from ROLLOUT_PIPELINE_COMMIT', () => {
  assert.equal(versionWith({ ...noGit, ROLLOUT_PIPELINE_COMMIT: 'abc123def456' }), `${version}+abc123def456`);
});

test('without git and without a recorded commit, it says unknown', () => {
  assert.equal(versionWith(noGit), `${version}+unknown`);
  assert.equal(versionWith({ ...noGit, ROLLOUT_PIPELINE_COMMIT: 'unknown' }), `${version}+unknown`);
});

test('in a checkout, git wins over the variable', () => {
  const fromGit = versionWith({ PATH: process.env.PATH ?? '', ROLLOUT_PIPELINE_COMMIT: 'not-this-one' });
  assert.match(fromGit, new RegExp(`^${version.replace(/\./g, '\\.')}\\+[0-9a-f]{12}(\\+dirty)?$`));
});
