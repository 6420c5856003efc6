/**
 * `rollout gc` with no Temporal server: a clear error naming the address and
 * the fix, and `--offline`, which reaps from the sandbox registry alone a
 * sandbox whose worker process is gone, never one a live process holds;
 * `--dry-run` shows the same decisions and removes nothing. A layer's loop device
 * whose sandbox directory was removed without a teardown is detached too.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createDiskLayer } from '../../sandboxes/local/diskLayer.js';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { freePort } from '../../servers/temporalDevServer.js';
import { countLeaks, leaksUnder } from '../faults/faultKit.js';
import { eventually } from '../helpers/eventually.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const scratch = mkdtempSync(join(tmpdir(), 'gc-offline-'));
const sandboxRoot = join(scratch, 'sandboxes');
const environmentDir = join(root, 'examples/tasks/write-greeting/environment');

after(() => rmSync(scratch, { recursive: true, force: true }));

function rollout(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [join(root, 'client/bin/rollout.js'), ...args], { env: { ...process.env, ROLLOUT_SANDBOX_ROOT: sandboxRoot, TEMPORAL_ADDRESS: '' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

/** A worker-like process that provisions one sandbox, prints its id and waits to be killed. */
async function sandboxOfADyingProcess(): Promise<string> {
  const provider = join(root, 'sandboxes/local/localSandboxProvider.ts');
  const code = `const { LocalSandboxProvider } = await import(${JSON.stringify(provider)});
const { handle } = await new LocalSandboxProvider({ stateRoot: ${JSON.stringify(sandboxRoot)} }).provision({ environmentDir: ${JSON.stringify(environmentDir)}, owner: { workflowId: 'rollout/gone/x/0', runId: 'r', attempt: 0 } });
console.log(handle.id); setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const id = await new Promise<string>((done) => child.stdout.on('data', (d: Buffer) => done(d.toString().trim())));
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  return id;
}

test('rollout gc without a server names the address and the fix; --offline reaps only what no live process holds', { timeout: 180_000 }, async () => {
  const address = `127.0.0.1:${await freePort()}`;
  const online = await rollout(['gc', '--address', address]);
  assert.equal(online.code, 2, online.stderr);
  assert.match(online.stderr, new RegExp(`cannot reach the Temporal server at ${address.replaceAll('.', '\\.')}`));
  assert.match(online.stderr, /Fix: start it \(rollout server, or rollout run --embedded\), or point --address \/ TEMPORAL_ADDRESS/);
  assert.match(online.stderr, /rollout gc --offline/);
  assert.doesNotMatch(online.stderr, /ServiceError|at .*\.(js|ts):\d+/, 'no stack trace');

  const orphan = await sandboxOfADyingProcess();
  const provider = new LocalSandboxProvider({ stateRoot: sandboxRoot });
  const { handle: held } = await provider.provision({ environmentDir, owner: { workflowId: 'rollout/live/x/0', runId: 'r', attempt: 0 } });
  try {
    assert.deepEqual((await provider.list()).filter((s) => s.alive).map((s) => s.id).sort(), [orphan, held.id].sort(), 'both sandboxes run; the orphan outlived its process');

    const preview = await rollout(['gc', '--offline', '--dry-run']);
    assert.equal(preview.code, 0, preview.stderr);
    assert.match(preview.stdout, new RegExp(`^would remove ${orphan} \\(holder-gone; owner rollout/gone/x/0 attempt 0\\)$`, 'm'));
    assert.match(preview.stdout, new RegExp(`^kept ${held.id} \\(held by a live worker process; owner rollout/live/x/0\\)$`, 'm'));
    assert.match(preview.stdout, /^2 sandboxes examined offline, 1 would remove, 1 kept$/m);
    assert.equal((await provider.list()).filter((s) => s.alive).length, 2, 'a dry run removes nothing');

    const gc = await rollout(['gc', '--offline']);
    assert.equal(gc.code, 0, gc.stdout + gc.stderr);
    assert.match(gc.stdout, new RegExp(`^removed ${orphan} \\(holder-gone;`, 'm'));
    assert.deepEqual((await provider.list()).map((s) => [s.id, s.alive]), [[held.id, true]], 'the sandbox a live process holds is untouched');
  } finally {
    await provider.teardown(held);
  }
  await eventually(async () => leaksUnder(sandboxRoot, [orphan, held.id]), (l) => countLeaks(l) === 0, 'no process, mount, directory or cgroup of either sandbox left', 20_000);
});

test("rollout gc --offline detaches the loop device of a sandbox layer whose directory was removed without a teardown, and no other program's", { timeout: 60_000 }, async () => {
  // A sandbox's state directory is named by its id; a blank in the path checks losetup's escaping.
  const stateDir = join(scratch, 'sbx-removed without teardown');
  const otherDir = join(scratch, 'another-program');
  mkdirSync(stateDir, { recursive: true });
  mkdirSync(otherDir, { recursive: true });
  const device = await createDiskLayer(stateDir, 16);
  const other = await createDiskLayer(otherDir, 16);
  const attachedTo = (dev: string): string => execFileSync('losetup', ['--list', '--noheadings', '--output', 'NAME,BACK-FILE'], { encoding: 'utf8' }).split('\n').find((l) => l.startsWith(`${dev} `))?.slice(dev.length + 1).trim() ?? '';
  try {
    rmSync(stateDir, { recursive: true, force: true });
    rmSync(otherDir, { recursive: true, force: true });
    assert.equal(attachedTo(device), `${join(stateDir, 'rw.img')} (deleted)`, 'the device outlives the directory: nothing else would ever detach it');
    const gc = await rollout(['gc', '--offline']);
    assert.equal(gc.code, 0, gc.stdout + gc.stderr);
    assert.match(gc.stdout, new RegExp(`^released loop device ${device} of the deleted layer ${join(stateDir, 'rw.img').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(left by a sandbox removed without a teardown\\)$`, 'm'));
    assert.equal(attachedTo(device), '', 'the loop device is detached');
    assert.equal(attachedTo(other), `${join(otherDir, 'rw.img')} (deleted)`, 'a deleted rw.img outside a sandbox directory is not ours: left attached');
    assert.doesNotMatch(gc.stdout, new RegExp(`released loop device ${other} `));
  } finally {
    spawnSync('losetup', ['--detach', device]);
    spawnSync('losetup', ['--detach', other]);
  }
});
