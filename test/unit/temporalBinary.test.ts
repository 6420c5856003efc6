/**
 * A missing or broken Temporal CLI is reported as what to install, never as a
 * stack trace, both from the library and from the `rollout` command line.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { resolveTemporalBinary, TemporalBinaryError } from '../../servers/temporalBinary.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const scratch = mkdtempSync(join(tmpdir(), 'temporal-binary-test-'));

function expectInstallAdvice(err: unknown): boolean {
  assert.ok(err instanceof TemporalBinaryError, `expected TemporalBinaryError, got ${String(err)}`);
  assert.match(err.message, /go install github\.com\/temporalio\/cli\/cmd\/temporal@v1\.5\.1/);
  assert.match(err.message, /TEMPORAL_CLI_PATH/);
  return true;
}

test('a TEMPORAL_CLI_PATH that does not exist names what to install', async () => {
  await assert.rejects(
    resolveTemporalBinary({ TEMPORAL_CLI_PATH: join(scratch, 'nope'), PATH: '' }),
    (err) => expectInstallAdvice(err) && /No executable Temporal CLI at .*nope/.test((err as Error).message),
  );
});

test('a binary that is not the Temporal CLI is rejected with what it printed', async () => {
  const impostor = join(scratch, 'temporal');
  writeFileSync(impostor, '#!/bin/sh\necho "I am not temporal"\n');
  chmodSync(impostor, 0o755);
  await assert.rejects(
    resolveTemporalBinary({ TEMPORAL_CLI_PATH: impostor, PATH: '' }),
    (err) => expectInstallAdvice(err) && /is not the Temporal CLI.*I am not temporal/.test((err as Error).message),
  );
});

test('a binary that crashes is rejected', async () => {
  const broken = join(scratch, 'temporal-broken');
  writeFileSync(broken, '#!/bin/sh\nexit 3\n');
  chmodSync(broken, 0o755);
  await assert.rejects(
    resolveTemporalBinary({ TEMPORAL_CLI_PATH: broken, PATH: '' }),
    (err) => expectInstallAdvice(err) && /does not run as the Temporal CLI/.test((err as Error).message),
  );
});

test('with no binary anywhere, the error lists every place it looked', async () => {
  await assert.rejects(
    resolveTemporalBinary({ PATH: mkdtempSync(join(scratch, 'empty-bin-')), ROLLOUT_CACHE_DIR: join(scratch, 'empty-cache') }),
    (err) => expectInstallAdvice(err) && /none on PATH, none at .*empty-cache/.test((err as Error).message),
  );
});

test('the real binary the tests run on is found and reports its version', async () => {
  const found = await resolveTemporalBinary();
  assert.match(found.version, /^\d+\.\d+\.\d+/);
});

test('`rollout server` with a missing binary exits 2 with advice and no stack trace', { timeout: 60_000 }, () => {
  const run = spawnSync(process.execPath, [join(root, 'client/bin/rollout.js'), 'server'], {
    env: { ...process.env, TEMPORAL_CLI_PATH: join(scratch, 'missing-temporal') },
    encoding: 'utf8',
    timeout: 50_000,
  });
  assert.equal(run.status, 2, `stdout: ${run.stdout}\nstderr: ${run.stderr}`);
  assert.match(run.stderr, /go install github\.com\/temporalio\/cli\/cmd\/temporal@v1\.5\.1/);
  assert.doesNotMatch(run.stderr, /^\s+at /m, 'no stack trace');
});
