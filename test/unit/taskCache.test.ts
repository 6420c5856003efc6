/**
 * The task cache of the activities: a task that did not change is not read
 * again, and any change (even one that keeps the size and the mtime) is seen
 * at the next call, exactly as loadTask would see it.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { loadTask } from '../../tasks/loadTask.js';
import { TaskCache } from '../../tasks/taskCache.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');
const scratch = mkdtempSync(join(tmpdir(), 'task-cache-test-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

const SETTLE_MS = 300;

function copyExample(as: string): string {
  const dir = join(scratch, as);
  cpSync(join(examples, 'fix-median'), dir, { recursive: true });
  return dir;
}

test('an unchanged task is answered from the cache with what loadTask returns', async () => {
  const dir = copyExample('unchanged');
  await sleep(SETTLE_MS + 50);
  const cache = new TaskCache({ settleMs: SETTLE_MS });
  const first = cache.load(dir);
  assert.deepEqual(first, loadTask(dir));
  for (let i = 0; i < 5; i++) assert.equal(cache.load(dir).version, first.version);
  assert.deepEqual(cache.stats(), { hits: 5, loads: 1 });
});

test('an edit that keeps the size and puts the mtime back is still seen', async () => {
  const dir = copyExample('same-size-edit');
  const tests = join(dir, 'tests', 'test.sh');
  await sleep(SETTLE_MS + 50);
  const cache = new TaskCache({ settleMs: SETTLE_MS });
  const before = cache.load(dir);
  cache.load(dir);
  assert.equal(cache.stats().hits, 1);

  const { atime, mtime } = statSync(tests);
  const original = readFileSync(tests, 'utf8');
  // The passing branch now writes reward 0: a verifier swapped for one that always fails, same size.
  const edited = original.replace('then echo 1', 'then echo 0');
  assert.notEqual(edited, original, 'the edit changes a character');
  assert.equal(edited.length, original.length, 'the edit keeps the size');
  writeFileSync(tests, edited);
  utimesSync(tests, atime, mtime);

  const after = cache.load(dir);
  assert.notEqual(after.version, before.version, 'the new content was hashed');
  assert.notEqual(after.verifierHash, before.verifierHash);
  assert.equal(after.version, loadTask(dir).version);
});

test('a task changed moments ago is loaded in full until it settles', async () => {
  const dir = copyExample('fresh');
  const cache = new TaskCache({ settleMs: SETTLE_MS });
  cache.load(dir);
  cache.load(dir);
  assert.deepEqual(cache.stats(), { hits: 0, loads: 2 }, 'just written: not trusted to the fingerprint');
  await sleep(SETTLE_MS + 50);
  cache.load(dir);
  cache.load(dir);
  assert.deepEqual(cache.stats(), { hits: 1, loads: 3 });
});

test('a task that became invalid fails as loadTask fails, naming the file and the fix', async () => {
  const dir = copyExample('broken');
  await sleep(SETTLE_MS + 50);
  const cache = new TaskCache({ settleMs: SETTLE_MS });
  cache.load(dir);
  writeFileSync(join(dir, 'task.toml'), '[agent\ntimeout_sec = 1\n');
  assert.throws(
    () => cache.load(dir),
    (err: Error) => err.name === 'task/invalid_spec' && /task\.toml/.test(err.message) && /Fix: /.test(err.message),
  );
  rmSync(dir, { recursive: true });
  assert.throws(
    () => cache.load(dir),
    (err: Error) => err.name === 'task/invalid_spec' && /is not a task directory/.test(err.message),
  );
});
