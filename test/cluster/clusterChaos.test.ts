/**
 * The chaos suite on the production topology (cluster/): the real Temporal server on PostgreSQL,
 * every service its own process (two history processes, 8 shards), and three worker hosts (each
 * a `rollout worker` process with its own host id, state root and sandboxes, sharing the task
 * queues), running batches of three groups with a scripted policy of model-like latency. Each
 * fault in turn, and for each what a trainer checks: every rollout of the batch comes back once,
 * scored; an attempt the fault ended is infra with evidence and retried (on another host when
 * its host died); nothing is laid on the model; nothing is left on any host.
 * Prints a summary table and writes it to test-output/cluster-chaos-summary.md.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { FsTrajectoryStore } from '../../stores/fsTrajectoryStore.js';
import { submitBatch } from '../../client/submitBatch.js';
import { ATTRIBUTED_MODEL_TYPES } from '../../shared/failures.js';
import { hostTaskQueue, rolloutWorkflowId } from '../../shared/names.js';
import type { GroupResult, RolloutResult } from '../../shared/pipeline.js';
import { localHandle } from '../../shared/sandbox.js';
import { rolloutProgressQuery } from '../../workflows/definitions.js';
import { resolveTemporalBinary } from '../../servers/temporalBinary.js';
import { temporalSettings } from '../../workers/temporalConnection.js';
import { eventually } from '../helpers/eventually.js';
import { runRolloutCli } from '../helpers/rolloutCli.js';
import { realTemporalServer } from '../helpers/realTemporalServer.js';
import { ClusterMachine } from '../helpers/netns/clusterMachine.js';
import { hostNetworkSettings, NetnsHost } from '../helpers/netns/netnsHost.js';
import { startScriptedOpenAIServer, type Script, type ScriptedOpenAIServer } from '../helpers/scriptedOpenAIServer.js';
import { countLeaks, FaultHost, summaryTable, type FaultRow } from '../faults/faultKit.js';
import type { WorkerProcess } from '../helpers/workerProcess.js';
import proto from '@temporalio/proto';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const WRITE_GREETING = "printf 'Hello, rollout!\\nRewards are earned.\\n' > /app/greeting.txt";
const GROUP_SIZE = 3;
const TASK_IDS = ['greeting-a', 'greeting-b', 'greeting-c'];

const { skip } = realTemporalServer();
const execFileAsync = promisify(execFile);
/** Worker Versioning: every worker of the suite is a build of this deployment; new rollouts start on `currentBuild`. */
const DEPLOYMENT = `chaos-${process.pid}`;
let currentBuild = 'build-a';

const scratch = mkdtempSync(join(tmpdir(), 'cluster-chaos-'));
chmodSync(scratch, 0o755); // PostgreSQL runs as the postgres user and must reach its directory
const rows: FaultRow[] = [];
let cluster: ClusterMachine;
let connection: Connection;
let client: Client;
let llm: ScriptedOpenAIServer;
const hosts: FaultHost[] = [];
const machines: NetnsHost[] = [];
const networkBefore = hostNetworkSettings();
let tasks: string[] = [];

/** Turn 0 runs a command that takes 4 s and writes the right answer; turn 1 submits. */
const slowGreeting: Script = (_req, turn) =>
  turn === 0 ? { content: 'Working.', toolCalls: [{ name: 'bash', arguments: { command: `sleep 4; ${WRITE_GREETING}` } }] } : { content: 'Done.', toolCalls: [{ name: 'submit', arguments: {} }] };

function allRollouts(groups: GroupResult[]): RolloutResult[] {
  return groups.flatMap((g) => g.rollouts);
}

/** Which host provisioned each attempt's sandbox: `${workflowId}#${attempt, from 0}` → host name. */
function provisionedOn(): Map<string, string> {
  const where = new Map<string, string>();
  for (const host of hosts) {
    for (const line of host.workers.flatMap((w) => w.lines)) {
      if (line.msg === 'sandbox provisioned') where.set(`${String(line.workflowId)}#${String(line.attempt)}`, host.name);
    }
  }
  return where;
}

/**
 * Waits until every rollout has reached its 4 s tool call (is in it, or, on a loaded machine where the
 * others were slow to get there, already past it), so the fault lands mid-batch.
 */
async function allInToolCall(batchId: string): Promise<void> {
  const past = new Set(['verifying', 'tearing-down', 'done']);
  for (const taskId of TASK_IDS) {
    for (let i = 0; i < GROUP_SIZE; i++) {
      const handle = client.workflow.getHandle(rolloutWorkflowId(batchId, taskId, i));
      await eventually(
        () => handle.query(rolloutProgressQuery).catch(() => undefined),
        (p) => p !== undefined && ((p.stage === 'agent' && p.lastAction.includes('sleep')) || past.has(p.stage)),
        `${taskId}/${i} in its tool call or past it`,
        180_000,
      );
    }
  }
}

/**
 * Makes `buildId` the deployment's current version the way an operator does, with the Temporal CLI
 * (`temporal worker deployment set-current-version`), once that build's workers poll every queue of it.
 */
async function setCurrentBuild(buildId: string): Promise<void> {
  const cli = (await resolveTemporalBinary()).path;
  const tls = cluster.state.clientEnv;
  const tlsFlags = ['--tls-cert-path', tls.TEMPORAL_TLS_CLIENT_CERT_PATH, '--tls-key-path', tls.TEMPORAL_TLS_CLIENT_KEY_PATH, '--tls-ca-path', tls.TEMPORAL_TLS_SERVER_CA_CERT_PATH, '--tls-server-name', tls.TEMPORAL_TLS_SERVER_NAME].map(String);
  const args = ['worker', 'deployment', 'set-current-version', '--deployment-name', DEPLOYMENT, '--build-id', buildId, '--address', cluster.frontendAddress, '--namespace', cluster.namespace, ...tlsFlags, '--yes'];
  await eventually(
    () => execFileAsync(cli, args).then(() => 'ok', (err: { stderr?: string; message: string }) => err.stderr ?? err.message),
    (out) => out === 'ok',
    `${buildId} made the current version of ${DEPLOYMENT}`,
    60_000,
  );
  // The new routing reaches every partition of every queue of the deployment asynchronously; until it
  // has, a new workflow can still start on the old build. The server says when it is done.
  const COMPLETED = proto.temporal.api.enums.v1.RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED;
  await eventually(
    () => client.workflowService.describeWorkerDeployment({ namespace: cluster.namespace, deploymentName: DEPLOYMENT }),
    (d) => d.workerDeploymentInfo?.routingConfig?.currentDeploymentVersion?.buildId === buildId && d.workerDeploymentInfo.routingConfigUpdateState === COMPLETED,
    `the routing to ${buildId} propagated to every task queue partition`,
    60_000,
  );
  currentBuild = buildId;
}

/**
 * Waits until nothing runs pinned to `buildId` (what the server's drainage status tracks, without its
 * minutes of delay). Visibility lists the candidates; each is checked with describe, which reads the
 * workflow's own state: visibility can lag behind it for minutes after PostgreSQL was down (the case
 * before this one kills it), listing as running a workflow that has finished.
 */
async function drained(buildId: string): Promise<void> {
  // The janitor's scheduled runs are left out: they are not pinned (they move to the current build when
  // its workers leave; checked at the end of the upgrade case). Rollouts are what drain.
  const query = `TemporalWorkerDeploymentVersion = "${DEPLOYMENT}:${buildId}" AND ExecutionStatus = "Running" AND WorkflowType != "janitor"`;
  const stillOpen = async (): Promise<string[]> => {
    const open: string[] = [];
    for await (const wf of client.workflow.list({ query })) {
      const { status } = await client.workflow.getHandle(wf.workflowId, wf.runId).describe();
      if (status.name === 'RUNNING') open.push(wf.workflowId);
    }
    return open;
  };
  await eventually(stillOpen, (open) => open.length === 0, `no workflow running pinned to ${buildId}`, 300_000);
}

/** The version a workflow is pinned to, from the server's own description of it. */
async function pinnedBuild(workflowId: string): Promise<string> {
  const { raw } = await client.workflow.getHandle(workflowId).describe();
  const info = raw.workflowExecutionInfo?.versioningInfo;
  const pinned = info?.behavior === proto.temporal.api.enums.v1.VersioningBehavior.VERSIONING_BEHAVIOR_PINNED;
  return `${pinned ? 'pinned' : `behavior ${String(info?.behavior)}`} to ${info?.deploymentVersion?.buildId ?? 'no build'}`;
}

interface BatchOutcome {
  groups: GroupResult[];
  rollouts: RolloutResult[];
  infraAttempts: number;
}

interface RunningBatch {
  name: string;
  batchId: string;
  /** The build that was current when it was submitted: every rollout of it runs there. */
  startedOn: string;
  results: Promise<GroupResult[]>;
}

/** Submits a batch of three groups and collects its results as they come. */
async function submitChaosBatch(name: string): Promise<RunningBatch> {
  const batchId = `chaos-${name.replace(/[^A-Za-z0-9]+/g, '-')}-${Date.now()}`;
  const host = hosts[0] as FaultHost;
  const startedOn = currentBuild;
  const batch = await submitBatch(client, {
    batchId,
    taskQueues: host.taskQueues,
    tasks,
    groupSize: GROUP_SIZE,
    minValid: 1,
    policy: { kind: 'openai', baseUrl: llm.baseUrl, model: 'chaos-model', sampling: { seed: 1 } },
  });
  const results = (async () => {
    const out: GroupResult[] = [];
    for await (const g of batch.results()) out.push(g);
    return out;
  })();
  return { name, batchId, startedOn, results };
}

/** What holds for every fault, checked on a finished batch; adds its row to the summary. */
async function checkBatch(batch: RunningBatch, injected: number): Promise<BatchOutcome> {
  const groups = await batch.results;
  const rollouts = allRollouts(groups);
  // Every rollout of the batch came back exactly once, scored.
  assert.deepEqual(groups.map((g) => g.taskId).sort(), [...TASK_IDS].sort(), 'each group once');
  for (const g of groups) {
    assert.equal(g.status, 'complete', `${g.taskId}: ${g.statusReason}`);
    assert.deepEqual(g.rollouts.map((r) => r.index).sort(), [0, 1, 2], `${g.taskId}: each rollout once`);
  }
  for (const r of rollouts) assert.deepEqual([r.workflowId, r.reward, r.outcomeClass], [r.workflowId, 1, 'ok'], `${r.workflowId}: ${JSON.stringify(r.attemptHistory)}`);
  // Each rollout ran on the build that was current when the batch started, and its experiment record says so.
  for (const r of rollouts) assert.deepEqual(r.experiment?.workerBuild, { deploymentName: DEPLOYMENT, buildId: batch.startedOn }, `${r.workflowId}: its build`);
  // Nothing the fault did is laid on the model; every infra attempt says why.
  let infraAttempts = 0;
  for (const r of rollouts) {
    for (const a of r.attemptHistory) {
      assert.ok(!(a.outcomeClass === 'model' && (ATTRIBUTED_MODEL_TYPES as readonly string[]).includes(a.outcomeType)), `${r.workflowId} attempt ${a.attempt} laid on the model: ${a.outcomeType} ${a.message}`);
      if (a.outcomeClass === 'infra') {
        infraAttempts++;
        assert.ok(a.message.length > 0 || (a.evidence?.length ?? 0) > 0, `${r.workflowId} attempt ${a.attempt}: infra with no evidence`);
      }
    }
  }
  // Nothing is left on any host once its worker reaped (a host that was down comes back first).
  for (const h of hosts) if (!h.workers.some(isLive)) await h.startWorker();
  let leaks = 0;
  for (const h of hosts) leaks += await eventually(async () => h.leaks(), (l) => countLeaks(l) === 0, `nothing left under ${h.sandboxRoot}`, 60_000).then(countLeaks);
  rows.push({
    fault: batch.name,
    faultsInjected: injected,
    rolloutsAffected: rollouts.filter((r) => r.attempts > 1).length,
    completed: rollouts.filter((r) => r.reward !== null).length,
    classifiedInfra: rollouts.filter((r) => r.attemptHistory.some((a) => a.outcomeClass === 'infra')).length,
    scoredModel: rollouts.filter((r) => r.outcomeClass === 'model').length,
    misattributed: 0,
    leaks,
  });
  return { groups, rollouts, infraAttempts };
}

/** Submits a batch of three groups, runs `fault` while it runs, and checks what holds for every fault. */
async function batchThrough(name: string, fault: (batchId: string) => Promise<number>): Promise<BatchOutcome> {
  const batch = await submitChaosBatch(name);
  const injected = await fault(batch.batchId);
  return checkBatch(batch, injected);
}

/** Whether a TCP connection to host:port from this process (the host's network) is accepted. */
function tcpAccepts(address: string): Promise<boolean> {
  const [host = '', port = ''] = address.split(':');
  return new Promise((res) => {
    const socket = connect({ host, port: Number(port) });
    const done = (ok: boolean): void => {
      socket.destroy();
      res(ok);
    };
    socket.setTimeout(2_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

const isLive = (w: WorkerProcess): boolean => w.child.exitCode === null && w.child.signalCode === null;

/** Stops worker processes the way an orchestrator does (SIGTERM: no new work, running calls finish) and returns how each exited. */
async function stopGracefully(workers: WorkerProcess[]): Promise<string[]> {
  for (const w of workers) w.kill('SIGTERM');
  return Promise.all(workers.map((w) => w.exited));
}

/** SIGKILLs a Temporal service process mid-batch and starts it again after `downMs`. */
async function killService(batchId: string, name: string, downMs: number): Promise<number> {
  await allInToolCall(batchId);
  await cluster.service(name).kill();
  await sleep(downMs);
  await cluster.service(name).start();
  return 1;
}

describe('cluster chaos: the real Temporal server on PostgreSQL, three worker hosts', { skip, timeout: 3_600_000 }, () => {
  before(async () => {
    // The servers and PostgreSQL on a machine of their own (a namespace); a random 127.78.x.* so two
    // test runs on one machine do not take each other's addresses for the frontend's relay.
    cluster = await ClusterMachine.start(join(scratch, 'servers'), { dir: join(scratch, 'cluster'), historyShards: 8, historyProcesses: 2, loopbackPrefix: `127.78.${1 + Math.floor(Math.random() * 250)}` });
    // The cluster speaks mTLS: the test connects as a worker does, with the cluster's client certificate.
    connection = await Connection.connect({ address: cluster.frontendAddress, tls: temporalSettings(cluster.frontendAddress, cluster.state.clientEnv).tls ?? false });
    client = new Client({ connection, namespace: cluster.namespace });
    llm = await startScriptedOpenAIServer(slowGreeting, { delayMs: 300 });
    for (const id of TASK_IDS) {
      const dir = join(scratch, 'tasks', id);
      cpSync(join(root, 'examples/tasks/write-greeting'), dir, { recursive: true });
      tasks.push(dir);
    }
    const shared = { queuePrefix: `chaos-${process.pid}`, deploymentName: DEPLOYMENT, address: cluster.frontendAddress, store: `fs:${join(scratch, 'trajectories')}`, env: cluster.state.clientEnv };
    // Each host a machine of its own: network and UTS namespaces, reaching only the frontend (on the
    // servers' machine) and the policy endpoint.
    const reachable = [cluster.frontendReachable, { host: '127.0.0.1', port: Number(new URL(llm.baseUrl).port) }];
    for (const name of ['host-a', 'host-b', 'host-c']) {
      const netns = await NetnsHost.create(name, join(scratch, 'netns', name), reachable);
      machines.push(netns);
      hosts.push(new FaultHost(scratch, name, { ...shared, netns }));
    }
    await Promise.all(hosts.map((h) => h.startWorker({ build: currentBuild, stopGraceSec: 30 })));
    await setCurrentBuild(currentBuild);
  });

  after(async () => {
    const table = summaryTable(rows);
    process.stdout.write(`\ncluster chaos summary\n${table}\n`);
    mkdirSync(join(root, 'test-output'), { recursive: true });
    writeFileSync(join(root, 'test-output/cluster-chaos-summary.md'), `# Cluster chaos summary (${new Date().toISOString()})\n\n${table}\n`);
    for (const h of hosts) await h.stop(client).catch(() => undefined);
    for (const h of hosts) await h.reapLeftovers(); // nothing left behind when a case failed midway
    for (const m of machines) await m.destroy();
    await llm?.close();
    await connection?.close();
    await cluster?.destroy();
    rmSync(scratch, { recursive: true, force: true });
    tasks = [];
  });

  test('each host is a machine of its own: its hostname is its host id, and it reaches the cluster only through its relays', () => {
    assert.deepEqual(
      machines.map((m) => m.hostname()),
      ['host-a', 'host-b', 'host-c'],
    );
    assert.deepEqual(
      hosts.map((h) => h.hostId),
      ['host-a', 'host-b', 'host-c'],
    );
  });

  test('the servers and PostgreSQL are a machine of their own: every process in its namespace, only the frontend reachable from outside', async () => {
    const state = await cluster.refresh();
    const servers = ClusterMachine.networkOf(cluster.netns.pid);
    const elsewhere = [ClusterMachine.networkOf(process.pid), ...machines.map((m) => ClusterMachine.networkOf(m.pid))];
    assert.ok(!elsewhere.includes(servers), "the servers' namespace is neither the host's nor a worker host's");
    const pids = [...state.services.map((s) => ({ name: s.name, pid: s.pid })), { name: 'postgres', pid: state.postgres.pid }];
    for (const { name, pid } of pids) {
      assert.ok(pid !== undefined, `${name} runs`);
      assert.equal(ClusterMachine.networkOf(pid), servers, `${name} (pid ${pid}) runs in the servers' namespace`);
    }
    // From the host's network: the frontend answers through its relay; PostgreSQL and the other services do not exist here.
    assert.equal(await tcpAccepts(state.frontendAddress), true, `the frontend at ${state.frontendAddress}`);
    const inside = [...state.services.filter((s) => s.service !== 'frontend').map((s) => s.address), new URL(state.postgres.url).host];
    for (const address of inside) assert.equal(await tcpAccepts(address), false, `${address} is not reachable from the host's network`);
  });

  test('no fault: the batch spreads over the hosts and every rollout is scored once', async () => {
    const { rollouts, infraAttempts } = await batchThrough('none', async () => 0);
    assert.equal(infraAttempts, 0);
    const where = provisionedOn();
    const used = new Set(rollouts.map((r) => where.get(`${r.workflowId}#0`)));
    assert.ok(used.size >= 2, `rollouts ran on ${[...used].join(', ')}: the three hosts share the queues`);
  });

  test('a whole worker host killed mid-batch (its worker and every sandbox process): its attempts are infra and retried on the other hosts', async () => {
    let victim: FaultHost | undefined;
    let degradedStatus = '';
    const { rollouts } = await batchThrough('worker host killed', async (batchId) => {
      await allInToolCall(batchId);
      const where = provisionedOn();
      const counts = hosts.map((h) => [...where.values()].filter((n) => n === h.name).length);
      const busiest = hosts[counts.indexOf(Math.max(...counts))] as FaultHost;
      victim = busiest;
      for (const w of busiest.workers) w.kill('SIGKILL');
      await Promise.all(busiest.workers.map((w) => w.exited));
      for (const record of await new LocalSandboxProvider({ stateRoot: busiest.sandboxRoot }).list()) if (record.handle) process.kill(localHandle(record.handle).pid, 'SIGKILL');
      // While the batch waits on the dead host, `rollout status` says so: which call waits on which queue,
      // and that nothing polls that queue any more.
      const queue = hostTaskQueue(busiest.hostId);
      degradedStatus = await eventually(
        () => runRolloutCli(['status', batchId, '--address', cluster.frontendAddress], root, { TEMPORAL_NAMESPACE: cluster.namespace, ...cluster.state.clientEnv }),
        (r) => r.stdout.split('\n').some((line) => line.includes(`for a worker on ${queue}, which no worker has polled`)),
        `rollout status names ${queue} as the queue the batch waits on`,
        120_000,
      ).then((r) => r.stdout);
      return 1;
    });
    process.stdout.write(`rollout status while ${victim?.name ?? '?'} was down:\n${degradedStatus}\n`);
    const where = provisionedOn();
    const hit = rollouts.filter((r) => where.get(`${r.workflowId}#0`) === victim?.name);
    assert.ok(hit.length > 0, 'the killed host held rollouts');
    for (const r of hit) {
      assert.equal(r.attemptHistory[0]?.outcomeClass, 'infra', `${r.workflowId}: ${JSON.stringify(r.attemptHistory[0])}`);
      const last = where.get(`${r.workflowId}#${r.attempts - 1}`);
      assert.ok(last !== undefined && last !== victim?.name, `${r.workflowId}: its last attempt ran on ${last}, not on the dead ${victim?.name}`);
    }
  });

  test('a host cut off from the network for 40 s (past the 15 s heartbeat timeout), then reconnected: the batch completes, what it held finishes there or is infra and retried, each turn has one answer, nothing is left behind', async () => {
    let victim: NetnsHost | undefined;
    const asked = llm.requests.length;
    const { rollouts } = await batchThrough('host cut off 40 s', async (batchId) => {
      await allInToolCall(batchId);
      const where = provisionedOn();
      const counts = machines.map((m) => [...where.values()].filter((n) => n === m.name).length);
      const cut = machines[counts.indexOf(Math.max(...counts))] as NetnsHost;
      victim = cut;
      cut.cutOff();
      await sleep(40_000);
      cut.reconnect();
      return 1;
    });
    const policyRequests = llm.requests.length - asked;
    const host = hosts.find((h) => h.name === victim?.name) as FaultHost;
    assert.ok(
      host.workers.some(isLive),
      `the worker of ${host.name} rode out the partition`,
    );
    // Its rollouts either waited for it and finished in their first sandboxes once it was back, or lost
    // that attempt as infra: the server hands a tool call's retries to the polls the cut-off worker had
    // open before the cut, so each retry times out on its heartbeat too (infra/worker_lost), and a fresh
    // attempt runs wherever a worker is. Never a model failure, never a lost rollout.
    const where = provisionedOn();
    const held = rollouts.filter((r) => where.get(`${r.workflowId}#0`) === host.name);
    assert.ok(held.length > 0, `${host.name} held rollouts when it was cut off`);
    for (const r of held) {
      for (const a of r.attemptHistory.slice(0, -1)) assert.equal(a.outcomeClass, 'infra', `${r.workflowId}: ${JSON.stringify(r.attemptHistory)}`);
    }
    process.stdout.write(`cut off: ${held.length} rollouts on ${host.name}; attempts ${held.map((r) => r.attempts).join(' ')}; first attempts ${held.map((r) => `${r.attemptHistory[0]?.outcomeClass}/${r.attemptHistory[0]?.outcomeType}`).join(' ')}\n`);
    // A turn whose answer was lost in the partition is asked again, but each turn has one answer in the trajectory.
    assert.ok(policyRequests >= 18, `${policyRequests} policy requests for 9 rollouts of 2 turns`);
    const store = new FsTrajectoryStore(join(scratch, 'trajectories'));
    for (const r of rollouts) {
      const names = await store.list(r.trajectoryRef, `attempt-${String(r.attempts - 1).padStart(2, '0')}/`);
      assert.equal(names.filter((n) => n.endsWith('.policy.json')).length, 2, `${r.trajectoryRef}: two policy turns, ${names.join(' ')}`);
      assert.equal(names.filter((n) => /\.tool-\d+\.json$/.test(n)).length, 1, `${r.trajectoryRef}: one tool record`);
    }
  });

  test('a history process SIGKILLed mid-batch and kept down: the other one takes over its shards and the batch completes', async () => {
    await batchThrough('Temporal history-1 killed, kept down', async (batchId) => {
      await allInToolCall(batchId);
      await cluster.service('history-1').kill();
      return 1;
    });
    // Twelve workflows over 8 shards split between two processes: the batch finished only because
    // history-2 took history-1's shards over. It comes back for the cases after this one.
    await cluster.service('history-1').start();
  });

  for (const name of ['history-2', 'matching', 'frontend', 'worker']) {
    test(`the Temporal ${name} process SIGKILLed mid-batch and restarted: the batch completes`, async () => {
      await batchThrough(`Temporal ${name} killed`, (batchId) => killService(batchId, name, 3_000));
    });
  }

  test('PostgreSQL stopped for 20 s mid-batch and started again: the batch completes', async () => {
    await batchThrough('PostgreSQL stopped 20 s', async (batchId) => {
      await allInToolCall(batchId);
      await cluster.postgres.stop();
      await sleep(20_000);
      await cluster.postgres.start();
      return 1;
    });
  });

  test('PostgreSQL SIGKILLed mid-batch and restarted (crash recovery): the batch completes', async () => {
    await batchThrough('PostgreSQL killed', async (batchId) => {
      await allInToolCall(batchId);
      await cluster.postgres.kill();
      await sleep(2_000);
      await cluster.postgres.start();
      return 1;
    });
  });

  test('a rolling upgrade of the workers mid-batch with Worker Versioning: running rollouts finish on the build they started on, new ones start on the new build, no attempt is lost to it', async () => {
    const from = currentBuild;
    const to = 'build-b';
    const first = await submitChaosBatch(`rolling upgrade, started on ${from}`);
    await allInToolCall(first.batchId);
    const old = hosts.map((h) => h.workers.filter(isLive));
    // The new build's worker starts beside the old one on every host (the Temporal Worker Controller's
    // rainbow), and the operator makes it current: a batch submitted now starts there.
    await Promise.all(hosts.map((h) => h.startWorker({ build: to, stopGraceSec: 30 })));
    await setCurrentBuild(to);
    const second = await submitChaosBatch(`rolling upgrade, started on ${to}`);
    // The old worker of the first host leaves at once, with the first batch running: its calls finish,
    // the rollouts pinned to the old build go on with the old workers of the other hosts, and the
    // sandboxes it held are served by the new worker on that host (host queues are not versioned).
    const leftEarly = await stopGracefully(old[0] ?? []);
    await first.results;
    // Once the old build is drained (nothing pinned to it runs: its workers would be the only ones that
    // could run it), its workers leave the other hosts while the second batch runs.
    await drained(from);
    const leftLater = await stopGracefully(old.slice(1).flat());
    const oldBuildGone = new Date();
    await second.results;
    // The hosts' janitor runs are not pinned (they move to the current build), so one started on the old
    // build is not stranded when its workers leave: it would block its schedule's later runs (overlap SKIP).
    const janitorQuery = `WorkflowType = "janitor" AND ExecutionStatus = "Running" AND StartTime < "${oldBuildGone.toISOString()}"`;
    // Each open run with what the server says holds it (its pending activity or workflow task, its build), so a failure says why.
    const strandedJanitors = async (): Promise<string[]> => {
      const open: string[] = [];
      for await (const wf of client.workflow.list({ query: janitorQuery })) {
        const described = await client.workflow.getHandle(wf.workflowId, wf.runId).describe();
        if (described.status.name !== 'RUNNING') continue;
        const raw = described.raw;
        const activities = (raw.pendingActivities ?? []).map((a) => `${a.activityType?.name} ${String(a.state)} attempt ${a.attempt} on ${a.lastWorkerIdentity || 'no worker'}${a.lastFailure?.message ? ` (${a.lastFailure.message})` : ''}`);
        const task = raw.pendingWorkflowTask ? `workflow task ${String(raw.pendingWorkflowTask.state)} attempt ${raw.pendingWorkflowTask.attempt}` : 'no workflow task';
        const versioning = raw.workflowExecutionInfo?.versioningInfo;
        open.push(`${wf.workflowId}: ${[...activities, task].join('; ')}; behavior ${String(versioning?.behavior)} on ${versioning?.deploymentVersion?.buildId ?? '?'}`);
      }
      return open;
    };
    await eventually(strandedJanitors, (open) => open.length === 0, 'every janitor run started before the old build left has finished', 180_000);
    // The schedules fire every minute: the first run may still be ahead when this case runs alone.
    const janitorRun = async (): Promise<{ workflowId: string; runId: string } | undefined> => {
      for await (const wf of client.workflow.list({ query: 'WorkflowType = "janitor"' })) return wf;
      return undefined;
    };
    const someJanitor = await eventually(janitorRun, (wf) => wf !== undefined, 'a janitor run of the hosts’ schedules', 150_000);
    assert.ok(someJanitor);
    const janitorBehavior = (await client.workflow.getHandle(someJanitor.workflowId, someJanitor.runId).describe()).raw.workflowExecutionInfo?.versioningInfo?.behavior;
    assert.equal(janitorBehavior, proto.temporal.api.enums.v1.VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE, 'a janitor run on versioned workers is auto-upgrade, not pinned');
    const firstOutcome = await checkBatch(first, 1);
    const secondOutcome = await checkBatch(second, 0);
    assert.deepEqual([...leftEarly, ...leftLater], [...leftEarly, ...leftLater].map(() => 'exit 0'), 'the old workers stopped cleanly');
    // The server agrees: each workflow of a batch is pinned to the build it started on.
    for (const [outcome, build] of [[firstOutcome, from], [secondOutcome, to]] as const) {
      for (const r of outcome.rollouts) assert.equal(await pinnedBuild(r.workflowId), `pinned to ${build}`, r.workflowId);
    }
    // An upgrade is not a failure: no attempt of either batch ended infra.
    assert.equal(firstOutcome.infraAttempts + secondOutcome.infraAttempts, 0, 'no attempt lost to the upgrade');
  });

  test("the host's own network settings are as they were: links, addresses, routes, iptables rules, forwarding", () => {
    assert.deepEqual(hostNetworkSettings(), networkBefore);
  });
});
