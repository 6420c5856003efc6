/**
 * The local provider's pool of ready sandboxes (sandboxes/local/pool/):
 * a pooled sandbox handed to a rollout is fresh (reset and isolation hold
 * against one an earlier attempt used) and owned as the spec says; the reaper
 * keeps pooled sandboxes while their process lives; a worker shut down leaves
 * none; a killed worker's are reaped by the next start and by `rollout gc --offline`.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { reapSandboxes } from '../../sandboxes/reaper/reapSandboxes.js';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { SANDBOX_POOL_LABEL, type SandboxHandle, type SandboxSpec } from '../../shared/sandbox.js';
import { createLogger } from '../../workers/logger.js';
import { reapAtStart } from '../../workers/reapAtStart.js';
import { eventually } from '../helpers/eventually.js';
import { LocalSandboxInspector } from '../helpers/localSandboxInspector.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const scratch = mkdtempSync(join(tmpdir(), 'sandbox-pool-test-'));
const environmentDir = join(scratch, 'environment');
mkdirSync(environmentDir);
writeFileSync(join(environmentDir, 'start.txt'), 'hello\n');
const inspector = new LocalSandboxInspector();
after(() => rmSync(scratch, { recursive: true, force: true }));

const NO_LEFTOVERS = { processes: [], mounts: [], directories: [], other: [] };
const spec = (workflowId: string, attempt = 0): SandboxSpec => ({ environmentDir, owner: { workflowId, runId: 'run', attempt }, labels: { rollout: workflowId }, limits: { pids: 128 } });

async function idleIds(provider: LocalSandboxProvider): Promise<string[]> {
  return (await idle(provider)).map((s) => s.id);
}

/** The pool's ready sandboxes, with their handles (for the host-side leftover checks). */
async function idle(provider: LocalSandboxProvider): Promise<SandboxHandle[]> {
  return (await provider.list({ [SANDBOX_POOL_LABEL]: 'idle' })).flatMap((s) => (s.handle ? [s.handle] : []));
}

test('a pooled sandbox is fresh, owned by the rollout that takes it, isolated from the one before; shutdown drains the pool', { timeout: 120_000 }, async () => {
  const stateRoot = join(scratch, 'state-fresh');
  const provider = new LocalSandboxProvider({ stateRoot, pool: { max: 3, windowMs: 60_000 } });
  // The first provisions find nothing ready; they are the demand the pool refills to.
  const first = await provider.provision(spec('rollout/a/0'));
  inspector.track(first.handle);
  const used = await provider.exec(first.handle, 'echo secret > /app/left.txt && echo tmp > /tmp/left.txt && (setsid sleep 300 >/dev/null 2>&1 &) && echo ok');
  assert.equal(used.stdout, 'ok\n');
  const ready = await eventually(() => idleIds(provider), (ids) => ids.length >= 1, 'the pool holds a ready sandbox', 30_000);

  // The janitor on this worker must not take the pool's sandboxes for orphans (their owner is no workflow).
  const pass = await reapSandboxes(provider, async (workflowId) => (workflowId.startsWith('rollout/') ? 'open' : 'missing'));
  assert.deepEqual(pass.reaped.map((r) => r.id).filter((id) => ready.includes(id)), []);
  assert.ok(pass.kept.some((k) => ready.includes(k.id) && /ready in the sandbox pool of this process/.test(k.why)), JSON.stringify(pass.kept));

  const taken = await provider.provision(spec('rollout/b/0', 1));
  inspector.track(taken.handle);
  assert.ok(ready.includes(taken.handle.id), `provision handed out a ready sandbox (${taken.handle.id} of ${ready.join(', ')})`);
  assert.equal(taken.enforcedLimits.pids, first.enforcedLimits.pids);
  const record = (await provider.list({ rollout: 'rollout/b/0' })).find((s) => s.id === taken.handle.id);
  assert.deepEqual(record?.owner, { workflowId: 'rollout/b/0', runId: 'run', attempt: 1 });
  assert.equal(record?.labels[SANDBOX_POOL_LABEL], undefined, 'no longer the pool\'s');

  // Reset: nothing of the earlier attempt; only the init (the exec server, or the bash keeper without the helper) ran in it before.
  const look = await provider.exec(taken.handle, 'ls -A /app /tmp; ps -e -o pid=,comm=');
  assert.equal(look.exitCode, 0, look.stderr);
  assert.match(look.stdout, /^\/app:\nstart\.txt\n\n\/tmp:\n\s+1 (rollout-init|bash)\n\s+\d+ bash\n\s+\d+ ps\n$/, 'the start files only, nothing of the other attempt, and no process but the init and this command');
  // Isolation: the two live sandboxes do not see each other.
  const other = await provider.exec(first.handle, 'ls /app; pgrep -c sleep');
  assert.equal(other.stdout, 'left.txt\nstart.txt\n1\n');

  await provider.teardown(first.handle);
  await provider.teardown(taken.handle);
  assert.deepEqual(await inspector.leftovers(first.handle), NO_LEFTOVERS);
  assert.deepEqual(await inspector.leftovers(taken.handle), NO_LEFTOVERS);

  // Shutdown: every ready sandbox goes, refills included, and nothing of them is left on the host.
  const before = await eventually(() => idle(provider), (handles) => handles.length >= 1, 'the pool refilled', 30_000);
  for (const h of before) inspector.track(h);
  await provider.close();
  assert.deepEqual(await provider.list(), [], 'no sandbox left in the registry after close');
  for (const h of before) assert.deepEqual(await inspector.leftovers(h), NO_LEFTOVERS);
});

test('a killed worker\'s pooled sandboxes are reaped by the next start and by rollout gc --offline', { timeout: 180_000 }, async () => {
  const stateRoot = join(scratch, 'state-killed');
  const providerFile = join(root, 'sandboxes/local/localSandboxProvider.ts');
  // A worker-like process with a pool: two provisions of one shape, then it waits until two are ready and is killed.
  const code = `const { LocalSandboxProvider } = await import(${JSON.stringify(providerFile)});
const p = new LocalSandboxProvider({ stateRoot: ${JSON.stringify(stateRoot)}, pool: { max: 4, windowMs: 600000 } });
const s = (w) => ({ environmentDir: ${JSON.stringify(environmentDir)}, owner: { workflowId: w, runId: 'r', attempt: 0 } });
await p.provision(s('rollout/x/0')); await p.provision(s('rollout/y/0'));
while (p.pool.size < 2) await new Promise((r) => setTimeout(r, 50));
console.log('ready'); setInterval(() => {}, 1000);`;
  const reap = async (useGc: boolean): Promise<void> => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((done) => child.stdout.on('data', (d: Buffer) => d.toString().includes('ready') && done()));
    const provider = new LocalSandboxProvider({ stateRoot });
    const pooledHandles = await idle(provider);
    const pooled = pooledHandles.map((h) => h.id);
    assert.equal(pooled.length, 2, 'two ready sandboxes in the registry');
    for (const h of pooledHandles) inspector.track(h);
    // While the worker lives, its pool is kept, online or offline.
    const alive = await reapSandboxes(provider, null);
    assert.deepEqual(alive.reaped, []);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    if (useGc) {
      const gc = await new Promise<{ code: number | null; out: string }>((done) => {
        const run = spawn(process.execPath, [join(root, 'client/bin/rollout.js'), 'gc', '--offline'], { env: { ...process.env, ROLLOUT_SANDBOX_ROOT: stateRoot, TEMPORAL_ADDRESS: '' } });
        let out = '';
        run.stdout.on('data', (d: Buffer) => (out += d.toString()));
        run.stderr.on('data', (d: Buffer) => (out += d.toString()));
        run.on('close', (c) => done({ code: c, out }));
      });
      assert.equal(gc.code, 0, gc.out);
      for (const id of pooled) assert.match(gc.out, new RegExp(`^removed ${id} \\(holder-gone;`, 'm'));
    } else {
      const report = await reapAtStart(provider, async () => 'missing', createLogger('pool-test', join(scratch, 'reap.log')));
      assert.deepEqual(pooled.filter((id) => !report?.reaped.some((r) => r.id === id)), [], 'every pooled sandbox reaped at the next start');
    }
    assert.deepEqual(await provider.list(), []);
    for (const h of pooledHandles) assert.deepEqual(await inspector.leftovers(h), NO_LEFTOVERS);
  };
  await reap(false);
  await reap(true);
});
