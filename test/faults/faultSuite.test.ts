/**
 * The fault suite (`npm run test:faults`, and part of `npm test`): real
 * faults injected into a real pipeline — `rollout worker` processes, the
 * Temporal dev server, local sandboxes, a scripted OpenAI-compatible
 * endpoint — and, for each, the outcomes and counts a user checks: every
 * rollout ends scored or classified, nothing is done twice, nothing leaks.
 * Prints a summary table and writes it to test-output/fault-summary.md.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { toolName, type ToolTurnRecord } from '../../agent/conversation.js';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { FsTrajectoryStore } from '../../stores/fsTrajectoryStore.js';
import { submitBatch } from '../../client/submitBatch.js';
import { groupWorkflowId, rolloutWorkflowId } from '../../shared/names.js';
import { localHandle } from '../../shared/sandbox.js';
import type { GroupResult, PolicyConfig, RolloutResult } from '../../shared/pipeline.js';
import { janitorScheduleId } from '../../workers/janitorSchedule.js';
import { freePort, startDevServer } from '../../servers/temporalDevServer.js';
import { rolloutProgressQuery } from '../../workflows/definitions.js';
import { eventually } from '../helpers/eventually.js';
import { startScriptedOpenAIServer, type Script, type ScriptedOpenAIServer } from '../helpers/scriptedOpenAIServer.js';
import { connectClient } from '../helpers/temporal.js';
import { scriptedTokens } from '../helpers/scriptedTokens.js';
import { countLeaks, FaultHost, resumeCostTable, rowFor, runGroups, summaryTable, type FaultRow, type ResumeRow } from './faultKit.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const greetingTask = join(root, 'examples/tasks/write-greeting');
const WRITE_GREETING = "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt";
const scratch = mkdtempSync(join(tmpdir(), 'faults-'));
const rows: FaultRow[] = [];
/** Case 10: what an infra failure costs in model calls and tokens, restarted or resumed. */
const resumeRows: ResumeRow[] = [];
let client: Client;
let closeClient: () => Promise<void>;

/** Turn 0 runs a command that takes `sleepSec` and writes the right answer; turn 1 submits. */
function slowGreeting(sleepSec: number): Script {
  return (_req, turn) =>
    turn === 0 ? { content: 'Working.', toolCalls: [{ name: 'bash', arguments: { command: `sleep ${sleepSec}; ${WRITE_GREETING}` } }] } : { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] };
}

function openai(llm: ScriptedOpenAIServer): PolicyConfig {
  return { kind: 'openai', baseUrl: llm.baseUrl, model: 'fault-model', sampling: { seed: 1 } };
}

/** Waits until every rollout of the group is inside its `sleep` tool call. */
async function allInToolCall(c: Client, batchId: string, taskId: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const handle = c.workflow.getHandle(rolloutWorkflowId(batchId, taskId, i));
    await eventually(() => handle.query(rolloutProgressQuery).catch(() => undefined), (p) => p?.stage === 'agent' && p.lastAction.includes('sleep'), `rollout ${i} in its tool call`, 120_000);
  }
  await sleep(1_000); // the tool activities have started on the host
}

function assertLeakFree(host: FaultHost): Promise<number> {
  return eventually(async () => host.leaks(), (l) => countLeaks(l) === 0, `no sandbox, process, mount, directory or cgroup left under ${host.sandboxRoot}`, 30_000).then(countLeaks);
}

function rolloutsOf(groups: GroupResult[]): RolloutResult[] {
  return groups.flatMap((g) => g.rollouts);
}

before(async () => {
  ({ client, close: closeClient } = await connectClient());
});

after(async () => {
  const table = summaryTable(rows);
  const resumeTable = resumeRows.length > 0 ? `\n\nwhat an infra failure costs (case 10)\n${resumeCostTable(resumeRows)}` : '';
  process.stdout.write(`\nfault suite summary\n${table}${resumeTable}\n`);
  mkdirSync(join(root, 'test-output'), { recursive: true });
  writeFileSync(join(root, 'test-output/fault-summary.md'), `# Fault suite summary (${new Date().toISOString()})\n\n${table}${resumeTable}\n`);
  await closeClient();
  rmSync(scratch, { recursive: true, force: true });
});

// 45 minutes: about 8 beside other files on a quiet machine, past 25 on the same VM when its host was busy.
describe('fault suite', { timeout: 2_700_000 }, () => {
  test('1. worker SIGKILLed during a tool call, a new worker started: rollouts re-attach to their sandboxes and finish; no turn is done twice', async () => {
    const host = new FaultHost(scratch, 'sigkill');
    const llm = await startScriptedOpenAIServer(slowGreeting(6));
    try {
      const first = await host.startWorker();
      const batchId = `fault-sigkill-${Date.now()}`;
      const run = await runGroups(client, host, { batchId, tasks: [greetingTask], groupSize: 3, policy: openai(llm) });
      await allInToolCall(client, batchId, 'write-greeting', 3);
      first.kill('SIGKILL');
      await first.exited;
      assert.equal((await new LocalSandboxProvider({ stateRoot: host.sandboxRoot }).list()).filter((r) => r.alive).length, 3, 'the sandboxes outlive their worker');
      await host.startWorker();
      const groups = await run.results();
      const rollouts = rolloutsOf(groups);
      assert.deepEqual(rollouts.map((r) => [r.reward, r.outcomeClass, r.attempts]), [[1, 'ok', 1], [1, 'ok', 1], [1, 'ok', 1]], 'each rollout continued in its first sandbox');
      const store = new FsTrajectoryStore(host.trajectories);
      for (const r of rollouts) {
        const names = await store.list(r.trajectoryRef, 'attempt-00/');
        assert.equal(names.filter((n) => n.endsWith('.policy.json')).length, 2, `${r.trajectoryRef}: two policy turns`);
        assert.equal(names.filter((n) => /\.tool-\d+\.json$/.test(n)).length, 1, `${r.trajectoryRef}: one tool record`);
      }
      assert.equal(llm.requests.length, 6, 'one policy request per turn: no turn was asked twice');
      rows.push(rowFor('worker SIGKILLed mid tool call, restarted', 1, groups, 3, await assertLeakFree(host)));
    } finally {
      await host.stop(client);
      await llm.close();
    }
  });

  test('1b. worker and its sandboxes killed (host crash), worker restarted: infra/sandbox_lost, a fresh attempt, scored', async () => {
    const host = new FaultHost(scratch, 'host-crash');
    const llm = await startScriptedOpenAIServer(slowGreeting(6));
    try {
      const first = await host.startWorker();
      const batchId = `fault-host-crash-${Date.now()}`;
      const run = await runGroups(client, host, { batchId, tasks: [greetingTask], groupSize: 2, policy: openai(llm) });
      await allInToolCall(client, batchId, 'write-greeting', 2);
      first.kill('SIGKILL');
      await first.exited;
      for (const record of await new LocalSandboxProvider({ stateRoot: host.sandboxRoot }).list()) if (record.handle) process.kill(localHandle(record.handle).pid, 'SIGKILL');
      await host.startWorker();
      const groups = await run.results();
      for (const r of rolloutsOf(groups)) {
        assert.deepEqual([r.reward, r.outcomeClass, r.attempts], [1, 'ok', 2]);
        assert.equal(`${r.attemptHistory[0]?.outcomeClass}/${r.attemptHistory[0]?.outcomeType}`, 'infra/sandbox_lost');
      }
      rows.push(rowFor('worker + sandboxes killed, worker restarted', 3, groups, 2, await assertLeakFree(host)));
    } finally {
      await host.stop(client);
      await llm.close();
    }
  });

  test('1c. policy calls as local activities: the worker SIGKILLed while the model answers, a new worker started: each turn is asked again or its recorded answer returned, and every rollout finishes in its first sandbox', async () => {
    const host = new FaultHost(scratch, 'local-policy');
    // Every answer takes 3 s: the kill lands while the second turn's calls are in the worker.
    const llm = await startScriptedOpenAIServer((_req, turn) => (turn === 0 ? { content: 'Writing.', toolCalls: [{ name: 'bash', arguments: { command: WRITE_GREETING } }] } : { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] }), { delayMs: 3_000 });
    try {
      const first = await host.startWorker();
      const batchId = `fault-local-policy-${Date.now()}`;
      const run = await runGroups(client, host, { batchId, tasks: [greetingTask], groupSize: 3, policy: openai(llm), policyCalls: 'local' });
      await eventually(async () => llm.requests.length, (n) => n >= 4, 'a second-turn policy call in flight', 120_000);
      first.kill('SIGKILL');
      await first.exited;
      const askedBeforeKill = llm.requests.length;
      await host.startWorker();
      const groups = await run.results();
      const rollouts = rolloutsOf(groups);
      assert.deepEqual(rollouts.map((r) => [r.reward, r.outcomeClass, r.attempts]), [[1, 'ok', 1], [1, 'ok', 1], [1, 'ok', 1]], 'each rollout continued in its first sandbox');
      const store = new FsTrajectoryStore(host.trajectories);
      for (const r of rollouts) {
        const names = await store.list(r.trajectoryRef, 'attempt-00/');
        assert.equal(names.filter((n) => n.endsWith('.policy.json')).length, 2, `${r.trajectoryRef}: two policy turns`);
        assert.equal(names.filter((n) => /\.tool-\d+\.json$/.test(n)).length, 1, `${r.trajectoryRef}: one tool record`);
      }
      // The calls the dead worker held were asked again (at most one per rollout); the rest once.
      assert.ok(llm.requests.length >= 6 && llm.requests.length <= 6 + (askedBeforeKill - 3), `${llm.requests.length} policy requests for 6 turns, ${askedBeforeKill} asked before the kill`);
      rows.push(rowFor('worker SIGKILLed mid policy call (local activity), restarted', 1, groups, 3, await assertLeakFree(host)));
    } finally {
      await host.stop(client);
      await llm.close();
    }
  });

  test("1d. attempts on their host: the host's worker SIGKILLed during a tool call, a new worker started: each attempt replays to its last marker on the new worker, re-attaches to its command and finishes in its first sandbox; no turn is asked twice", async () => {
    const host = new FaultHost(scratch, 'attempt-on-host-sigkill');
    const llm = await startScriptedOpenAIServer(slowGreeting(8));
    try {
      const first = await host.startWorker();
      const batchId = `fault-attempt-host-sigkill-${Date.now()}`;
      const run = await runGroups(client, host, { batchId, tasks: [greetingTask], groupSize: 3, policy: openai(llm), attemptOn: 'host' });
      // The attempt's markers reach the server at its workflow-task heartbeats (8 s), so the model's
      // requests say when every first turn is answered; its 8 s command runs then.
      await eventually(async () => llm.requests.length, (n) => n >= 3, 'every first turn answered', 120_000);
      await sleep(1_500);
      first.kill('SIGKILL');
      await first.exited;
      assert.equal((await new LocalSandboxProvider({ stateRoot: host.sandboxRoot }).list()).filter((r) => r.alive).length, 3, 'the sandboxes outlive their worker');
      await host.startWorker();
      const groups = await run.results();
      const rollouts = rolloutsOf(groups);
      assert.deepEqual(rollouts.map((r) => [r.reward, r.outcomeClass, r.attempts]), [[1, 'ok', 1], [1, 'ok', 1], [1, 'ok', 1]], 'each attempt continued in its first sandbox');
      const store = new FsTrajectoryStore(host.trajectories);
      for (const r of rollouts) {
        const names = await store.list(r.trajectoryRef, 'attempt-00/');
        assert.equal(names.filter((n) => n.endsWith('.policy.json')).length, 2, `${r.trajectoryRef}: two policy turns`);
        assert.equal(names.filter((n) => /\.tool-\d+\.json$/.test(n)).length, 1, `${r.trajectoryRef}: one tool record`);
      }
      assert.equal(llm.requests.length, 6, 'one policy request per turn: a replayed turn returned its recorded answer');
      rows.push(rowFor('host worker SIGKILLed mid tool call, attempts on the host, restarted', 1, groups, 3, await assertLeakFree(host)));
    } finally {
      await host.stop(client);
      await llm.close();
    }
  });

  test('1e. attempts on their host: the host gone for good mid tool call (its worker killed, never back), another host serving the pool: the rollout notices, and a fresh attempt on the other host is scored', async () => {
    const queuePrefix = `fault-host-gone-${Date.now()}`;
    const gone = new FaultHost(scratch, 'host-gone-a', { queuePrefix });
    const other = new FaultHost(scratch, 'host-gone-b', { queuePrefix });
    const llm = await startScriptedOpenAIServer(slowGreeting(8));
    try {
      const first = await gone.startWorker();
      const batchId = `fault-attempt-host-gone-${Date.now()}`;
      const run = await runGroups(client, gone, { batchId, tasks: [greetingTask], groupSize: 2, policy: openai(llm), attemptOn: 'host' });
      await eventually(async () => llm.requests.length, (n) => n >= 2, 'every first turn answered', 120_000);
      first.kill('SIGKILL');
      await first.exited;
      await other.startWorker();
      const groups = await run.results();
      for (const r of rolloutsOf(groups)) {
        assert.deepEqual([r.reward, r.outcomeClass, r.attempts], [1, 'ok', 2], JSON.stringify(r.attemptHistory));
        assert.equal(`${r.attemptHistory[0]?.outcomeClass}/${r.attemptHistory[0]?.outcomeType}`, 'infra/sandbox_lost', r.attemptHistory[0]?.message);
        assert.match(r.experiment?.workerIdentity ?? '', new RegExp(other.hostId), 'the second attempt ran on the other host');
      }
      // The dead host's sandboxes wait for its reaper (it never returns here): the case reaps them.
      assert.equal(await gone.reapLeftovers(), 2, 'the two sandboxes of the dead host were left to its reaper');
      rows.push(rowFor('host gone for good, attempts on the host, another host in the pool', 1, groups, 2, (await assertLeakFree(gone)) + (await assertLeakFree(other))));
    } finally {
      await gone.stop(client);
      await other.stop(client);
      await llm.close();
    }
  });

  test('2. the Temporal dev server stopped and restarted (--db-filename) mid-batch: the batch completes', async () => {
    const host = new FaultHost(scratch, 'server-restart');
    const llm = await startScriptedOpenAIServer(slowGreeting(4));
    const port = await freePort();
    const dbFilename = join(scratch, 'server-restart', 'temporal.sqlite');
    mkdirSync(dirname(dbFilename), { recursive: true });
    const serverOptions = { port, uiPort: false as const, dbFilename, logFile: join(scratch, 'server-restart', 'server.log') };
    let server = await startDevServer(serverOptions);
    let connection = await Connection.connect({ address: server.address });
    let own = new Client({ connection });
    try {
      await host.startWorker({ address: server.address });
      const batchId = `fault-server-restart-${Date.now()}`;
      await runGroups(own, host, { batchId, tasks: [greetingTask], groupSize: 3, policy: openai(llm) });
      await allInToolCall(own, batchId, 'write-greeting', 3);
      await connection.close();
      await server.stop();
      await sleep(5_000);
      server = await startDevServer(serverOptions);
      connection = await Connection.connect({ address: server.address });
      own = new Client({ connection });
      const group = (await own.workflow.getHandle(groupWorkflowId(batchId, 'write-greeting')).result()) as GroupResult;
      assert.equal(group.status, 'complete', group.statusReason);
      assert.deepEqual(group.rollouts.map((r) => [r.reward, r.outcomeClass]), [[1, 'ok'], [1, 'ok'], [1, 'ok']]);
      assert.ok(host.workers.every((w) => w.child.exitCode === null), 'the worker rode out the outage');
      rows.push(rowFor('Temporal server restarted mid-batch', 1, [group], 3, await assertLeakFree(host)));
    } finally {
      await host.stop(own);
      await connection.close();
      await server.stop();
      await llm.close();
    }
  });

  test('3. the inference endpoint down for 30 s mid-batch: rollouts wait and complete, none scored 0', async () => {
    const host = new FaultHost(scratch, 'inference-down');
    const llm = await startScriptedOpenAIServer(slowGreeting(2));
    try {
      const worker = await host.startWorker();
      const batchId = `fault-inference-down-${Date.now()}`;
      const run = await runGroups(client, host, { batchId, tasks: [greetingTask], groupSize: 3, policy: openai(llm) });
      await allInToolCall(client, batchId, 'write-greeting', 3);
      await llm.goDown();
      await sleep(30_000);
      await llm.comeBack();
      const groups = await run.results();
      const rollouts = rolloutsOf(groups);
      assert.deepEqual(rollouts.map((r) => [r.reward, r.outcomeClass, r.outcomeType, r.attempts]), Array.from({ length: 3 }, () => [1, 'ok', 'submitted', 1]));
      const refused = worker.lines.filter((l) => l.msg === 'policy call failed');
      assert.ok(refused.length >= 3, `every rollout hit the outage (${refused.length} failed policy calls logged)`);
      assert.ok(refused.every((l) => l.failure === 'infra/policy_unavailable'), `classified infra/policy_unavailable: ${JSON.stringify(refused[0])}`);
      const seen = llm.requests.flatMap((r) => r.messages.map((m) => m.content ?? ''));
      assert.ok(!seen.some((c) => /ECONNREFUSED|policy_unavailable|refused/i.test(c)), 'the outage never reached a conversation');
      rows.push(rowFor('inference endpoint down 30 s', 1, groups, 3, await assertLeakFree(host)));
    } finally {
      await host.stop(client);
      await llm.close();
    }
  });

  test('4. sandboxes killed from outside mid-turn: infra/sandbox_lost, retried on a fresh sandbox', async () => {
    const host = new FaultHost(scratch, 'sandbox-lost');
    const llm = await startScriptedOpenAIServer(slowGreeting(4));
    try {
      await host.startWorker();
      const batchId = `fault-sandbox-lost-${Date.now()}`;
      const run = await runGroups(client, host, { batchId, tasks: [greetingTask], groupSize: 2, policy: openai(llm) });
      await allInToolCall(client, batchId, 'write-greeting', 2);
      const killed = (await new LocalSandboxProvider({ stateRoot: host.sandboxRoot }).list()).filter((r) => r.handle);
      for (const record of killed) if (record.handle) process.kill(localHandle(record.handle).pid, 'SIGKILL');
      const groups = await run.results();
      for (const r of rolloutsOf(groups)) {
        assert.deepEqual([r.reward, r.outcomeClass, r.attempts], [1, 'ok', 2]);
        assert.equal(`${r.attemptHistory[0]?.outcomeClass}/${r.attemptHistory[0]?.outcomeType}`, 'infra/sandbox_lost');
      }
      rows.push(rowFor('sandboxes killed from outside', killed.length, groups, 2, await assertLeakFree(host)));
    } finally {
      await host.stop(client);
      await llm.close();
    }
  });

  test('5. a group cancelled and a group whose workflows were terminated: after the reaper, nothing is left', async () => {
    const host = new FaultHost(scratch, 'cancel-terminate');
    try {
      await host.startWorker();
      const stall = { kind: 'scripted', script: 'stall' } as const;
      const cancelled = `fault-cancel-${Date.now()}`;
      const terminated = `fault-terminate-${Date.now()}`;
      const a = await runGroups(client, host, { batchId: cancelled, tasks: [greetingTask], groupSize: 2, policy: stall, limits: { maxTurns: 1000 } });
      const b = await runGroups(client, host, { batchId: terminated, tasks: [greetingTask], groupSize: 2, policy: stall, limits: { maxTurns: 1000 } });
      for (const batchId of [cancelled, terminated]) {
        for (const i of [0, 1]) {
          const h = client.workflow.getHandle(rolloutWorkflowId(batchId, 'write-greeting', i));
          await eventually(() => h.query(rolloutProgressQuery).catch(() => undefined), (p) => p?.stage === 'agent' && p.turn >= 1, `${batchId} rollout ${i} running`);
        }
      }
      const provider = new LocalSandboxProvider({ stateRoot: host.sandboxRoot });
      assert.equal((await provider.list()).length, 4);

      await a.batch.groups[0]?.handle.cancel();
      // Terminate skips every finally: the rollouts cannot tear down; the reaper has to.
      for (const i of [0, 1]) await client.workflow.getHandle(rolloutWorkflowId(terminated, 'write-greeting', i)).terminate('fault suite');
      await b.batch.groups[0]?.handle.terminate('fault suite');
      await eventually(async () => (await provider.list()).length, (n) => n === 2, 'the cancelled group tore its two sandboxes down');
      assert.deepEqual((await provider.list()).map((r) => r.labels.batch), [terminated, terminated], 'the terminated rollouts left theirs');

      await client.schedule.getHandle(janitorScheduleId(host.hostId)).trigger();
      await eventually(async () => (await provider.list()).length, (n) => n === 0, 'the janitor reaped the orphans');
      const groups: GroupResult[] = [];
      rows.push({ ...rowFor('group cancelled + group terminated, reaper', 2, groups, 4, await assertLeakFree(host)), completed: 0 });
    } finally {
      await host.stop(client);
    }
  });

  test('6. disk full in a sandbox: the agent sees its command fail and recovers; nothing else breaks', async () => {
    const host = new FaultHost(scratch, 'disk-full');
    const task = join(scratch, 'tasks', 'small-disk-greeting');
    cpSync(greetingTask, task, { recursive: true });
    writeFileSync(join(task, 'task.toml'), readFileSync(join(task, 'task.toml'), 'utf8').replace('[environment]\n', '[environment]\nstorage_mb = 16\n'));
    const llm = await startScriptedOpenAIServer((_req, turn) => {
      if (turn === 0) return { toolCalls: [{ name: 'bash', arguments: { command: 'head -c 64M /dev/zero > /app/fill' } }] };
      if (turn === 1) return { toolCalls: [{ name: 'bash', arguments: { command: `rm -f /app/fill && ${WRITE_GREETING}` } }] };
      return { toolCalls: [{ name: 'submit', arguments: {} }] };
    });
    try {
      await host.startWorker();
      const batchId = `fault-disk-full-${Date.now()}`;
      const run = await runGroups(client, host, { batchId, tasks: [task], groupSize: 2, policy: openai(llm) });
      const groups = await run.results();
      const store = new FsTrajectoryStore(host.trajectories);
      for (const r of rolloutsOf(groups)) {
        assert.deepEqual([r.reward, r.outcomeClass, r.attempts], [1, 'ok', 1]);
        const fill = await store.get<ToolTurnRecord>(r.trajectoryRef, toolName(0, 0, 0));
        assert.ok(fill && fill.exitCode !== 0, `the fill command failed: ${JSON.stringify(fill)}`);
        assert.match(fill?.observation ?? '', /No space left on device/);
        const recover = await store.get<ToolTurnRecord>(r.trajectoryRef, toolName(0, 1, 0));
        assert.equal(recover?.exitCode, 0);
      }
      rows.push(rowFor('disk full in the sandbox', 2, groups, 2, await assertLeakFree(host)));
    } finally {
      await host.stop(client);
      await llm.close();
    }
  });

  test('7. 100 groups submitted twice concurrently: each group and rollout runs once', async () => {
    const host = new FaultHost(scratch, 'double-submit');
    const tasks = Array.from({ length: 100 }, (_, i) => {
      const dir = join(scratch, 'tasks100', `greeting-${String(i).padStart(3, '0')}`);
      cpSync(greetingTask, dir, { recursive: true });
      return dir;
    });
    try {
      const worker = await host.startWorker();
      const batchId = `fault-double-${Date.now()}`;
      const options = { batchId, taskQueues: host.taskQueues, tasks, groupSize: 1, minValid: 1, policy: { kind: 'scripted', script: 'noop' } as const };
      const [first, second] = await Promise.all([submitBatch(client, options), submitBatch(client, options)]);
      const started = [...first.groups, ...second.groups].filter((g) => g.started).length;
      assert.equal(started, 100, 'each group was started by exactly one of the two submissions');
      const groups: GroupResult[] = [];
      for await (const g of first.results()) groups.push(g);
      const again: GroupResult[] = [];
      for await (const g of second.results()) again.push(g);
      assert.equal(groups.length, 100);
      assert.deepEqual(
        again.map((g) => g.workflowId).sort(),
        groups.map((g) => g.workflowId).sort(),
        'the second submission attached to the same groups',
      );
      const rollouts = rolloutsOf(groups);
      const retried = rollouts.filter((r) => r.attempts > 1 || r.outcomeClass !== 'ok');
      if (retried.length > 0) {
        process.stdout.write(`# not first-time ok (classified, shown in the table):\n${retried.map((r) => `#   ${r.workflowId}: ${r.attemptHistory.map((a) => `${a.outcomeClass}/${a.outcomeType} ${a.message}`).join(' | ')}`).join('\n')}\n`);
      }
      assert.ok(rollouts.every((r) => (r.outcomeClass === 'ok' && r.reward === 0) || r.outcomeClass === 'infra'), 'every rollout scored (noop: 0) or classified infra');
      const provisioned = worker.lines.filter((l) => l.msg === 'sandbox provisioned').map((l) => `${String(l.workflowId)}#${String(l.attempt)}`);
      assert.equal(new Set(provisioned).size, provisioned.length, 'at most one sandbox per rollout attempt: no duplicated work');
      assert.ok(provisioned.length >= 100 && provisioned.length <= rollouts.reduce((n, r) => n + r.attempts, 0), `${provisioned.length} sandboxes for ${rollouts.length} rollouts`);
      const count = await eventually(async () => (await client.workflow.count(`RolloutBatch="${batchId}"`)).count, (n) => n >= 200, 'visibility caught up');
      assert.equal(count, 200, '100 group workflows and 100 rollout workflows, not more');
      rows.push(rowFor('100 groups submitted twice concurrently', 100, groups, 100, await assertLeakFree(host)));
    } finally {
      await host.stop(client);
    }
  });

  test('8. a verifier broken for every state (hangs; crashes without a reward): infra, retried, masked, never laid on the agent', async () => {
    const host = new FaultHost(scratch, 'verifier-broken');
    const tasks = ['verifier-always-hangs', 'verifier-never-rewards'].map((t) => join(root, 'test/fixtures/tasks', t));
    try {
      await host.startWorker();
      const run = await runGroups(client, host, { batchId: `fault-verifier-broken-${Date.now()}`, tasks, groupSize: 2, policy: { kind: 'scripted', script: 'oracle' } });
      const groups = await run.results();
      const rollouts = rolloutsOf(groups);
      for (const r of rollouts) {
        assert.deepEqual([r.outcomeClass, r.valid, r.reward, r.attempts], ['infra', false, null, 3], `${r.workflowId}: ${r.attemptHistory.map((a) => `${a.outcomeClass}/${a.outcomeType}`).join(' ')}`);
        assert.match(r.outcomeType, /^verifier_(timeout|crashed)$/);
        for (const a of r.attemptHistory) assert.ok(a.evidence?.some((e) => /control .*failed/.test(e)), `attempt ${a.attempt} names the failed control: ${JSON.stringify(a.evidence)}`);
      }
      for (const g of groups) assert.equal(g.status, 'insufficient', 'a group whose verifier is broken is not averaged');
      rows.push(rowFor('verifier broken for every state', 2, groups, 4, await assertLeakFree(host)));
    } finally {
      await host.stop(client);
    }
  });

  test("9. the host's disk full (a 4 MiB tmpfs as the sandbox state root, filled from the host): infra/provision_failed, masked, nothing left", async () => {
    const host = new FaultHost(scratch, 'host-disk-full');
    mkdirSync(host.sandboxRoot, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'rollout-fault-disk', host.sandboxRoot]);
    let mounted = true;
    try {
      await host.startWorker();
      // Filled from the host, after the worker started: no sandbox can write its state any more.
      try {
        execFileSync('sh', ['-c', `head -c 8M /dev/zero > ${join(host.sandboxRoot, '.fill')}`], { stdio: 'ignore' });
      } catch {
        // ENOSPC: full, as wanted
      }
      const run = await runGroups(client, host, { batchId: `fault-host-disk-${Date.now()}`, tasks: [greetingTask], groupSize: 2, policy: { kind: 'scripted', script: 'oracle' } });
      const groups = await run.results();
      for (const r of rolloutsOf(groups)) {
        assert.deepEqual([r.outcomeClass, r.outcomeType, r.valid, r.attempts], ['infra', 'provision_failed', false, 3], r.attemptHistory.map((a) => a.message).join(' | '));
        assert.match(r.attemptHistory[0]?.message ?? '', /No space left on device|ENOSPC/);
      }
      assert.equal(groups[0]?.masked?.count, 2);
      const leftover = host.leaks();
      const ownMount = (m: string): boolean => m.split(' ')[5] === host.sandboxRoot;
      rows.push(rowFor('host disk full (sandbox state root)', 1, groups, 2, countLeaks({ ...leftover, mounts: leftover.mounts.filter((m) => !ownMount(m)) })));
      execFileSync('umount', [host.sandboxRoot]);
      mounted = false;
    } finally {
      await host.stop(client);
      if (mounted) execFileSync('umount', ['-l', host.sandboxRoot]);
    }
  });

  test('10. resume: sandboxes lost at turn 6 of a 10-turn rollout with model-like time per turn: restart asks the model for turns 0-6 again, resume by replay for none', async () => {
    const TURNS = 10;
    const KILL_AT = 6;
    const script: Script = (_req, turn) => {
      if (turn >= TURNS - 1) return { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] };
      const step = `echo turn-${turn} >> /app/log.txt`;
      const command = turn === KILL_AT ? `sleep 5; ${step}` : turn === TURNS - 2 ? `${step} && ${WRITE_GREETING}` : step;
      return { content: `Step ${turn}.`, toolCalls: [{ name: 'bash', arguments: { command } }] };
    };
    for (const resume of ['restart', 'replay'] as const) {
      const host = new FaultHost(scratch, `resume-${resume}`);
      let generated = 0;
      const tokensOfTurn = new Map<number, number>();
      const ids = scriptedTokens();
      // An inference server's time per turn, and its token ids (counted as they are generated).
      const llm = await startScriptedOpenAIServer(script, {
        delayMs: 1_500,
        tokens: (req, answer) => {
          const t = ids.tokens(req, answer);
          generated += t.completionIds.length;
          tokensOfTurn.set(req.messages.filter((m) => m.role === 'assistant').length, t.completionIds.length);
          return t;
        },
      });
      try {
        await host.startWorker();
        const batchId = `fault-resume-${resume}-${Date.now()}`;
        const run = await runGroups(client, host, { batchId, tasks: [greetingTask], groupSize: 2, policy: openai(llm), resume, retries: 1 });
        await eventually(async () => llm.requests.length, (n) => n >= 2 * (KILL_AT + 1), `turn ${KILL_AT} asked for by both rollouts`, 180_000);
        await sleep(3_000); // the answers are in and the turn's 5 s commands run
        const killed = (await new LocalSandboxProvider({ stateRoot: host.sandboxRoot }).list()).filter((r) => r.handle);
        for (const record of killed) if (record.handle) process.kill(localHandle(record.handle).pid, 'SIGKILL');
        const groups = await run.results();
        const rollouts = rolloutsOf(groups);
        const store = new FsTrajectoryStore(host.trajectories);
        let replayMs = 0;
        let replayed = 0;
        let digestMs = 0;
        let digests = 0;
        for (const r of rollouts) {
          assert.deepEqual([r.reward, r.outcomeClass, r.attempts, r.turns], [1, 'ok', 2, TURNS], JSON.stringify(r.attemptHistory));
          assert.equal(`${r.attemptHistory[0]?.outcomeClass}/${r.attemptHistory[0]?.outcomeType}`, 'infra/sandbox_lost');
          assert.equal(r.tokenIntegrity?.status, 'ok', JSON.stringify(r.tokenIntegrity));
          const resumed = r.attemptHistory[1]?.resumed;
          if (resume === 'replay') {
            assert.deepEqual([resumed?.fromAttempt, resumed?.turns, resumed?.nextTurnAnswered, resumed?.stateChecked], [0, KILL_AT, true, true], JSON.stringify(r.attemptHistory[1]));
            replayMs += resumed?.replayMs ?? 0;
            replayed += resumed?.replayedCalls ?? 0;
            for (let turn = 0; turn < KILL_AT; turn++) {
              const record = await store.get<ToolTurnRecord>(r.trajectoryRef, toolName(0, turn, 0));
              digestMs += record?.stateMs ?? 0;
              digests += record?.stateMs !== undefined ? 1 : 0;
            }
          } else assert.equal(resumed, undefined);
          const log = await store.get<ToolTurnRecord>(r.trajectoryRef, toolName(1, TURNS - 2, 0));
          assert.equal(log?.exitCode, 0);
        }
        const calls = llm.requests.length;
        const perFailure = (calls - rollouts.length * TURNS) / killed.length;
        assert.equal(perFailure, resume === 'replay' ? 0 : KILL_AT + 1, `${resume}: model calls asked again per infra failure`);
        const once = rollouts.length * [...tokensOfTurn.values()].reduce((a, b) => a + b, 0);
        resumeRows.push({ resume, rollouts: rollouts.length, failures: killed.length, calls, callsAgain: perFailure, generated, tokensAgain: (generated - once) / killed.length, replayPerCallMs: replayed ? replayMs / replayed : null, digestPerCallMs: digests ? digestMs / digests : null });
        rows.push(rowFor(`sandboxes lost at turn ${KILL_AT} of ${TURNS}, resume ${resume}`, killed.length, groups, 2, await assertLeakFree(host)));
      } finally {
        await host.stop(client);
        await llm.close();
      }
    }
  });

  test('every case left nothing behind, and no real fault was laid on the agent', () => {
    assert.ok(rows.length >= 12, `all cases reported (${rows.length})`);
    for (const r of rows) assert.equal(r.leaks, 0, `${r.fault}: leaks`);
    for (const r of rows) assert.equal(r.misattributed, 0, `${r.fault}: misattributed`);
  });
});
