/**
 * `rollout show` as a person reads it, on a real batch through the real dev
 * server and real sandboxes: a rollout whose first sandbox was killed mid-turn
 * (infra, retried) and one that scored 0, turn by turn with tool outputs cut
 * to size, the verifier's output, reward and outcome; a rollout that is still
 * running; an id that does not exist.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { submitBatch } from '../../client/submitBatch.js';
import type { GroupResult } from '../../shared/pipeline.js';
import { cancelRolloutUpdate, rolloutProgressQuery } from '../../workflows/definitions.js';
import { eventually } from '../helpers/eventually.js';
import { FaultyProvider } from '../helpers/faultyProvider.js';
import { makeNoisyTask, PLANTED_SCRIPT } from '../helpers/noisyTask.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { runRolloutCli } from '../helpers/rolloutCli.js';
import { testServerAddress } from '../helpers/temporal.js';

const scratch = mkdtempSync(join(tmpdir(), 'rollout-show-'));
const task = makeNoisyTask(scratch);
let h: Harness;
let group: GroupResult;
const batchId = `show-${Date.now().toString(36)}`;

const show = (args: string[]) => runRolloutCli(['show', ...args, '--trajectories', h.store.root, '--address', testServerAddress()], scratch);

before(async () => {
  h = await startHarness('show');
  let killed = false;
  // The first run of the solution finds its sandbox killed from outside, as a lost host would.
  const faulty = new FaultyProvider(h.provider, {
    killBeforeExec: (_h, command) => {
      if (killed || !command.includes('solve.sh')) return false;
      killed = true;
      return true;
    },
  });
  await h.startWorkers({ provider: faulty });
  const batch = await submitBatch(h.client, {
    batchId,
    tasks: [task],
    groupSize: 2,
    policy: { kind: 'scripted', script: 'mixed' },
    failurePolicy: { infra: { retries: 2, backoffSec: 0 } },
    taskQueues: h.taskQueues,
  });
  for await (const g of batch.results()) group = g;
});

after(async () => {
  await h.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('rollout show', { timeout: 300_000 }, () => {
  test('a retried rollout: the failed attempt with its evidence, then the turns, tool outputs with sizes, verifier, reward', async () => {
    const retried = group.rollouts.find((r) => r.attempts === 2);
    assert.ok(retried, `one rollout lost its first sandbox: ${JSON.stringify(group.rollouts.map((r) => r.attemptHistory))}`);
    const out = await show([retried.workflowId]);
    assert.equal(out.code, 0, out.stderr);
    const text = out.stdout;
    const reward = retried.reward;
    assert.match(text, new RegExp(`^${retried.workflowId} · completed · ok/submitted · reward ${reward}$`, 'm'));
    assert.match(text, /^task noisy-greeting · version [0-9a-f]{12} · policy scripted:mixed · verify in-place$/m);
    assert.match(text, /^valid · advantage -?1\.000 · 2 attempts · 3 turns$/m);
    assert.match(text, /^timings: queue \d+.* · provision .* · agent .* · verify .* · teardown .*$/m);
    assert.match(text, /^instruction 187 B, 6 lines:\n {2}\| Create the file `\/app\/greeting\.txt`/m);
    // The failed attempt: class/type, the evidence, and what the store kept of it.
    assert.match(text, /^━━ attempt 1 of 2 · infra\/sandbox_lost · no reward · 1 turn$/m);
    assert.match(text, /^evidence: sandbox [a-z0-9-]+ (died during: bash \/solution\/solve\.sh|is gone: .*)$/m);
    assert.match(text, /^recorded: 2 policy turns, 1 tool result, no verifier result$/m);
    assert.match(text, /\(no result recorded: the attempt ended before or during this call\)/);
    // The attempt that counted, turn by turn.
    assert.match(text, new RegExp(`^━━ attempt 2 of 2 · ok/submitted · reward ${reward} · 3 turns$`, 'm'));
    assert.match(text, /^turn 0 · policy scripted:mixed · \d+ ms · finish tool_calls$/m);
    assert.match(text, /^ {2}message 28 B, 1 line:\n {4}\| Writing the solution script\.$/m);
    assert.match(text, /^ {4}took \d+ ms\n {4}output \d+ B, 1 line:\n {6}\| wrote \d+ bytes to \/solution\/solve\.sh$/m);
    assert.match(text, /^ {2}→ write_file \/solution\/solve\.sh$/m);
    assert.match(text, /^ {2}→ bash \$ bash \/solution\/solve\.sh$/m);
    assert.match(text, /^ {4}exit 0 · \d+ ms$/m);
    assert.match(text, /^ {2}→ submit\n {4}\(the agent stopped here; the verifier ran next\)$/m);
    assert.match(text, new RegExp(`^verifier \\(in-place\\) · reward ${reward} · test\\.sh exit 0 · \\d+ ms · reward\\.txt$`, 'm'));
    assert.match(text, /^ {2}verifier output \d+ B, 2 lines:\n {4}\| checking \/app\/greeting\.txt\n {4}\| (PASS greeting matches|FAIL greeting differs)$/m);
  });

  test('a long output is cut to its last lines with its size; stderr apart; markup shown as text', async () => {
    const oracle = group.rollouts.find((r) => r.index === 0);
    assert.ok(oracle);
    const out = await show([oracle.workflowId]);
    assert.equal(out.code, 0, out.stderr);
    // 60 build steps, a <script> line and an <img> line: 62 lines, of which the last 20 are shown.
    assert.match(out.stdout, /^ {4}stdout 1\.[0-9] KiB, 62 lines, showing last 20:$/m);
    assert.match(out.stdout, /^ {6}\| build step 43 of 60$/m);
    assert.doesNotMatch(out.stdout, /build step 42 of 60/);
    assert.ok(out.stdout.includes(`      | ${PLANTED_SCRIPT}\n`), 'the planted markup is printed as it was output');
    assert.match(out.stdout, /^ {4}stderr 43 B, 1 line:\n {6}\| warning: greeting written without a locale$/m);
    assert.match(out.stdout, /^ {4}\| PASS greeting matches$/m);

    const five = await show([oracle.workflowId, '--lines', '5']);
    assert.match(five.stdout, /^ {4}stdout 1\.[0-9] KiB, 62 lines, showing last 5:$/m);
    assert.doesNotMatch(five.stdout, /build step 57 of 60/);
    assert.match(five.stdout, /build step 58 of 60/);

    const html = join(scratch, 'rollout-0.html');
    const page = await show([oracle.workflowId, '--html', html]);
    assert.equal(page.code, 0, page.stderr);
    assert.match(page.stdout, new RegExp(`^html: ${html}$`, 'm'));
    const body = readFileSync(html, 'utf8');
    assert.doesNotMatch(body, /<script|<img/i, 'no markup the agent wrote survives as markup');
    assert.ok(body.includes('&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;'), 'it is there, escaped');
    assert.doesNotMatch(body, /https?:\/\//, 'no external assets');
  });

  test('the rollout that scored 0 says so', async () => {
    const bad = group.rollouts.find((r) => r.index === 1);
    assert.ok(bad);
    const out = await show([bad.workflowId]);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, new RegExp(`^${bad.workflowId} · completed · ok/submitted · reward 0$`, 'm'));
    assert.match(out.stdout, /^ {4}\| FAIL greeting differs$/m);
  });

  test('a running rollout shows what it has so far', async () => {
    const running = await submitBatch(h.client, {
      batchId: `${batchId}-live`,
      tasks: [task],
      groupSize: 1,
      minValid: 1,
      policy: { kind: 'scripted', script: 'stall' },
      limits: { maxTurns: 1000 },
      taskQueues: h.taskQueues,
    });
    const id = `rollout/${batchId}-live/noisy-greeting/0`;
    const handle = h.client.workflow.getHandle(id);
    await eventually(() => handle.query(rolloutProgressQuery).catch(() => undefined), (p) => p?.stage === 'agent' && p.turn >= 2, 'the stalling rollout in its agent loop');
    try {
      const out = await show([id]);
      assert.equal(out.code, 0, out.stderr);
      assert.match(out.stdout, new RegExp(`^${id} · running · stage agent, attempt 1, turn \\d+( \\(last: turn \\d+: bash: true\\))? · no reward yet$`, 'm'));
      assert.match(out.stdout, /^━━ attempt 1 of 1 · running$/m);
      assert.match(out.stdout, /^turn 1 · policy scripted:stall · \d+ ms · finish tool_calls$/m);
      assert.match(out.stdout, /^ {2}→ bash \$ true\n {4}exit 0 · \d+ ms\n {4}stdout empty\n {4}stderr empty$/m);
    } finally {
      await handle.executeUpdate(cancelRolloutUpdate, { args: [{ reason: 'test over' }] });
      for await (const g of running.results()) assert.equal(g.rollouts[0]?.outcomeClass, 'cancelled');
    }
    const cancelled = await show([id]);
    assert.match(cancelled.stdout, new RegExp(`^${id} · completed · cancelled/operator · no reward$`, 'm'));
    assert.match(cancelled.stdout, /^reason: test over$/m);
  });

  test('an id that does not exist is named, with the ids that do and how to list them', async () => {
    const missing = `rollout/${batchId}/noisy-greeting/7`;
    const out = await show([missing]);
    assert.equal(out.code, 2, out.stdout + out.stderr);
    assert.ok(out.stderr.includes(`no rollout ${missing} on the server at ${testServerAddress()}`), out.stderr);
    assert.ok(out.stderr.includes(`rollout/${batchId}/noisy-greeting/0, rollout/${batchId}/noisy-greeting/1`), out.stderr);
    assert.ok(out.stderr.includes(`\`rollout status ${batchId}\``), out.stderr);
    const malformed = await show(['fix-median/0']);
    assert.equal(malformed.code, 2);
    assert.match(malformed.stderr, /"fix-median\/0" is not a rollout workflow id; they look like rollout\/<batch>\/<task>\/<index>/);
    const groupId = await show([`rollout/${batchId}/noisy-greeting`]);
    assert.equal(groupId.code, 2);
    assert.ok(groupId.stderr.includes(`rollout/${batchId}/noisy-greeting names a group (rollout/<batch>/<task>); add the rollout's index, e.g. rollout/${batchId}/noisy-greeting/0`), groupId.stderr);
    const none = await show([]);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /name one rollout workflow id/);
  });
});
