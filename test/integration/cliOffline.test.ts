/**
 * Issue 29: after an embedded run has stopped, the commands that read a batch
 * answer from its data directory alone (a dev server started on its SQLite file
 * for the command), the same as with the server up; with another dev server on
 * the default port they still find the batch or say where it is; a batch found
 * nowhere is named with the batches that exist; an unreachable server is one
 * line, never a stack trace. Commands that change a batch refuse to act where
 * no workers run, and say how to serve it.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startDevServer, type RunningDevServer } from '../../servers/temporalDevServer.js';
import { processesMentioning } from '../helpers/localSandboxInspector.js';
import { runRolloutCli } from '../helpers/rolloutCli.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const scratch = mkdtempSync(join(tmpdir(), 'cli-offline-'));
const data = join(scratch, 'data');
const batch = 'offline-1';
const rollout0 = `rollout/${batch}/write-greeting/0`;
const STACK_FRAME = /^\s+at .*(\.ts|\.js|node:)/m;

/** `rollout ...` as a user runs it: no TEMPORAL_ADDRESS, so the default address and the data directory apply. */
function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runRolloutCli(args, scratch, { TEMPORAL_ADDRESS: undefined, ROLLOUT_SANDBOX_ROOT: join(scratch, 'sandboxes') });
}

/** Whether something listens on 127.0.0.1:7233 (the default address); the offline cases need it free. */
async function defaultPortTaken(): Promise<boolean> {
  const { connect } = await import('node:net');
  return new Promise((r) => {
    const s = connect({ host: '127.0.0.1', port: 7233 });
    s.once('connect', () => (s.destroy(), r(true)));
    s.once('error', () => r(false));
  });
}

let skip: string | false = false;
before(async () => {
  if (await defaultPortTaken()) {
    skip = 'something else listens on 127.0.0.1:7233, the default address these cases need free';
    return;
  }
  const run = await cli(['run', '--embedded', '--data-dir', data, '--tasks', join(root, 'examples/tasks/write-greeting'), '--group-size', '2', '--batch-id', batch, '--policy', 'scripted:mixed']);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /rollout show, status, report and export read this batch from .*temporal\.sqlite without it/);
  assert.deepEqual(processesMentioning(data), [], 'the embedded run stopped everything it started');
});

after(() => rmSync(scratch, { recursive: true, force: true }));

const READS: { name: string; args: (out: string) => string[]; check: (stdout: string) => void }[] = [
  { name: 'status', args: () => ['status', batch], check: (o) => assert.match(o, /write-greeting/) },
  { name: 'report', args: () => ['report', batch], check: (o) => assert.match(o, /write-greeting/) },
  { name: 'show', args: () => ['show', rollout0], check: (o) => assert.match(o, /reward/) },
  { name: 'export', args: (out) => ['export', batch, '--out', out, '--keep-broken'], check: (o) => assert.match(o, /^2 samples from 1 finished groups of batch offline-1/) },
  { name: 'replay-history', args: () => ['replay-history', rollout0], check: (o) => assert.match(o, /^replays: rollout\/offline-1\/write-greeting\/0/) },
];

describe('commands that read a batch, with its embedded run stopped', { timeout: 600_000 }, () => {
  test('each answers from the data directory alone, as it does with the server up, and says on stderr where it read', async (t) => {
    if (skip) return t.skip(skip);
    const served: RunningDevServer = await startDevServer({ uiPort: false, dbFilename: join(data, 'temporal.sqlite') });
    const withServer: Record<string, string> = {};
    try {
      for (const c of READS) withServer[c.name] = (await cli([...c.args(join(scratch, `${c.name}-served.jsonl`)), '--data-dir', data, '--address', served.address])).stdout;
    } finally {
      await served.stop();
    }
    for (const c of READS) {
      const out = join(scratch, `${c.name}-offline.jsonl`);
      const r = await cli([...c.args(out), '--data-dir', data]);
      assert.equal(r.code, 0, `${c.name}: ${r.stderr}`);
      assert.match(r.stderr, /no Temporal server at 127\.0\.0\.1:7233: reading from the embedded run's data in .*temporal\.sqlite/, `${c.name} says where it read`);
      c.check(r.stdout);
      assert.equal(r.stdout.replace(/-offline\.jsonl/g, ''), (withServer[c.name] ?? '').replace(/-served\.jsonl/g, ''), `${c.name}: the same answer as with the server up`);
      if (c.name === 'export') assert.equal(readFileSync(out, 'utf8'), readFileSync(join(scratch, 'export-served.jsonl'), 'utf8'), 'the same samples');
    }
    assert.deepEqual(processesMentioning(data), [], 'every command stopped the dev server it started');
  });

  test('with another dev server on the default port, a command still finds the embedded batch; a batch found nowhere is named with those that exist', async (t) => {
    if (skip) return t.skip(skip);
    const other = await startDevServer({ port: 7233, uiPort: false });
    try {
      const found = await cli(['status', batch, '--data-dir', data]);
      assert.equal(found.code, 0, found.stderr);
      assert.match(found.stderr, /batch offline-1 is not on the server at 127\.0\.0\.1:7233: reading it from the embedded run's data/);
      const missing = await cli(['status', 'no-such-batch', '--data-dir', data]);
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /^rollout: batch no-such-batch is not on the server at 127\.0\.0\.1:7233 \(it has no batches\) nor in the embedded run's data in .* \(it has batches offline-1\)/);
      assert.doesNotMatch(missing.stderr, STACK_FRAME);
    } finally {
      await other.stop();
    }
  });

  test('commands that change a batch refuse where no workers run, and say how to serve it', async (t) => {
    if (skip) return t.skip(skip);
    for (const args of [['rerun', rollout0], ['policy-version', batch, '2'], ['cancel', '--batch', batch]]) {
      const r = await cli([...args, '--data-dir', data]);
      assert.equal(r.code, 2, `${args[0]}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /^rollout: batch offline-1 is in the embedded run's data in .*, where no workers run: .* needs them\. Fix: serve it \(`npx rollout server --db-filename .*temporal\.sqlite` and `npx rollout worker`\)/);
    }
  });

  test('an unreachable server is one line naming the address and the fix, from every command', async () => {
    // (`rollout status` waits out an unreachable server first, as it does a restart: serverOutage.test.ts.)
    for (const args of [['report', batch], ['show', rollout0], ['export', batch, '--out', join(scratch, 'x.jsonl')], ['replay', rollout0], ['replay-history', rollout0], ['rerun', rollout0], ['policy-version', batch, '1'], ['cancel', '--batch', batch]]) {
      const r = await cli([...args, '--address', '127.0.0.1:1', '--data-dir', data]);
      assert.equal(r.code, 2, `${args[0]}: ${r.stderr}`);
      assert.match(r.stderr, /^rollout: no Temporal server answers at 127\.0\.0\.1:1 \(.*\)\. Fix: start the server .*\n$/, `${args[0]}: ${r.stderr}`);
      assert.doesNotMatch(r.stderr, STACK_FRAME, `${args[0]} prints no stack trace`);
    }
    assert.equal(existsSync(join(scratch, 'x.jsonl')), false, 'nothing written');
  });
});
