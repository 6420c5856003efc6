/**
 * The Python trainer's own tests (python/trainer/tests), in the trainer's venv: its state between
 * steps (a resumed step continues the same LoRA and optimizer) and the adapter conversion's errors,
 * on a small random model (no GGUF, seconds). Skipped without the venv (bash scripts/setup.sh train).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const python = process.env.ROLLOUT_TRAIN_PYTHON;

test("the trainer's state: two resumed steps are two steps of one process; a conversion names what is missing", { skip: python ? false : "needs the trainer's venv: bash scripts/setup.sh train prints ROLLOUT_TRAIN_PYTHON" }, () => {
  const py = spawnSync(python as string, ['-m', 'unittest', 'discover', '-v', '-s', join(root, 'python/trainer/tests')], { encoding: 'utf8', timeout: 300_000 });
  assert.equal(py.status, 0, py.stderr.slice(-4000));
  assert.match(py.stderr, /Ran 3 tests/);
  assert.doesNotMatch(py.stderr, /skipped/, 'every Python test ran');
});
