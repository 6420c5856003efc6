/**
 * The local provider's state digest (what resume checks a replayed call against): two sandboxes
 * that ran the same commands have the same digest; a file's times do not count, its content,
 * permission bits and deletion do, and the areas say where two states differ. Real sandboxes.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { differingAreas } from '../../resume/replayTurns.js';
import type { SandboxHandle, SandboxStateDigest } from '../../shared/sandbox.js';

const scratch = mkdtempSync(join(tmpdir(), 'state-digest-'));
const environmentDir = join(scratch, 'environment');
mkdirSync(environmentDir);
writeFileSync(join(environmentDir, 'start.txt'), 'hello\n');
const provider = new LocalSandboxProvider({ stateRoot: join(scratch, 'sandboxes') });

after(async () => {
  for (const record of await provider.list()) await provider.teardown(record.id);
  rmSync(scratch, { recursive: true, force: true });
});

async function sandbox(name: string): Promise<SandboxHandle> {
  const { handle } = await provider.provision({ environmentDir, owner: { workflowId: `state-digest/${name}`, runId: '', attempt: 0 } });
  return handle;
}

async function run(handle: SandboxHandle, command: string): Promise<SandboxStateDigest> {
  const r = await provider.exec(handle, command);
  assert.equal(r.exitCode, 0, `${command}: ${r.stderr}`);
  return provider.stateDigest(handle);
}

test('state digest: the same commands leave the same digest in two sandboxes; times do not count, content, modes and deletions do', { timeout: 120_000 }, async () => {
  const [a, b] = [await sandbox('a'), await sandbox('b')];
  const fresh = await provider.stateDigest(a);
  assert.equal((await provider.stateDigest(b)).digest, fresh.digest, 'two fresh sandboxes of one spec hold the same files');

  const steps = ['mkdir -p /app/out && echo 42 > /app/out/answer.txt', 'echo scratch > /tmp/notes && mkdir -p /root/.config && echo x > /root/.config/c', 'rm /app/start.txt'];
  for (const step of steps) {
    const [da, db] = [await run(a, step), await run(b, `sleep 1; ${step}`)];
    assert.equal(da.digest, db.digest, `after "${step}" (a second apart): ${differingAreas(da, db)}`);
  }
  const before = await provider.stateDigest(a);
  assert.ok(before.areas['/app/start.txt'], 'the deleted file of the lower layer counts (a whiteout)');
  assert.ok(before.areas['/tmp/notes'] && before.areas['/root/.config/c'], 'the tmpfs mounts count too');
  assert.equal((await run(a, 'touch -d 2001-01-01 /app/out/answer.txt /tmp/notes')).digest, before.digest, 'a new mtime alone changes nothing');

  const modes = await run(a, 'chmod 600 /app/out/answer.txt');
  assert.notEqual(modes.digest, before.digest, 'permission bits count');
  assert.equal(differingAreas(before, modes), '/app/out/answer.txt');
  const content = await run(b, 'echo 43 > /app/out/answer.txt');
  assert.notEqual(content.digest, before.digest, 'content counts');
  assert.equal(differingAreas(before, content), '/app/out/answer.txt');
  const added = await run(b, 'echo more > /app/out/extra.txt');
  assert.match(differingAreas(content, added), /^\/app\/out\/extra\.txt \(only in the replay\)$/);

  // Bytecode and caches embed the time they were made: counted apart, as drift.
  const [pa, pb] = [await run(a, 'mkdir -p /app/__pycache__ && date +%s%N > /app/__pycache__/m.cpython-311.pyc'), await run(b, 'mkdir -p /app/__pycache__ && date +%s%N > /app/__pycache__/m.cpython-311.pyc')];
  assert.equal(pa.digest, modes.digest, 'a new .pyc leaves the digest as it was');
  assert.ok(pa.volatile && pb.volatile && pa.volatile.digest !== pb.volatile.digest && pa.volatile.files === 2, 'the .pyc and its folder are in the volatile digest, which differs');
});

test('state digest: a sandbox that is gone is reported lost, not digested', { timeout: 60_000 }, async () => {
  const c = await sandbox('c');
  await provider.teardown(c);
  await assert.rejects(provider.stateDigest(c), (err: Error & { failureClass?: string; type?: string }) => err.type === 'sandbox_lost' && /is gone/.test(err.message));
});

test('state digest: hostile state is named, never followed or read without bound (links, a FIFO, /dev/zero, a sparse giant, too many files)', { timeout: 180_000 }, async () => {
  const d = await sandbox('hostile');
  writeFileSync(join(scratch, 'host-secret'), 'host secret\n');
  // Links to the host's files (absolute targets resolve against the host's root when followed from it), /dev/zero and a FIFO.
  const links = await run(d, `ln -s ${join(scratch, 'host-secret')} /app/secret && ln -s / /app/root && ln -s /dev/zero /app/zero && mkfifo /app/pipe`);
  assert.equal(links.tooLarge, undefined);
  const again = await run(d, 'true');
  assert.equal(again.digest, links.digest, 'read twice, the same: nothing was read through the links or from the FIFO');
  // A directory swapped for a link to / between the walk's steps is refused, not walked: walking the
  // same state with the link in place lists it as a link and nothing under it.
  assert.ok(links.files < 50, `a handful of entries, not the host's tree: ${links.files}`);

  const sparse = await run(d, 'truncate -s 300M /app/giant');
  assert.match(sparse.tooLarge ?? '', /\/app\/giant has 314572800 bytes, more than 268435456/);
  assert.equal(sparse.digest, 'too-large');
  await run(d, 'rm /app/giant');
  const many = await run(d, 'mkdir /app/many && cd /app/many && seq 1 201000 | xargs touch');
  assert.match(many.tooLarge ?? '', /more than 200000 entries/);
});
