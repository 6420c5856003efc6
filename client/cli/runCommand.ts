/**
 * `rollout run`: submits a batch, shows progress, writes one JSONL line per
 * rollout and prints the summary table. With --embedded it first starts a
 * local Temporal dev server and this machine's workers (the demo).
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { GroupResult } from '../../shared/pipeline.js';
import { freePort, startDevServer, type RunningDevServer } from '../../servers/temporalDevServer.js';
import { startLocalPipeline, type LocalPipeline } from '../../workers/startLocalPipeline.js';
import { BatchInputError, resolveBatch, submitResolvedBatch, type SubmitBatchOptions } from '../submitBatch.js';
import { summaryTable } from '../report/summaryTable.js';
import { submittedGroupStates } from '../console/batchStates.js';
import { progressDisplay } from '../console/progressDisplay.js';
import { watchProgress } from '../console/watchProgress.js';
import { temporalSettings, type openTemporalClient, type TemporalSettings } from '../../workers/temporalConnection.js';
import { dataDir as resolveDataDir, expandTaskDirs, parsePolicy, taskQueuesFor } from './cliSettings.js';
import { parseCommandLine } from './commandLine.js';
import { parseVerifyMode } from './verifyModeOption.js';
import { UsageError } from './usageError.js';
import type { NetworkMode } from '../../shared/task.js';
import { parseNetworkMode } from '../../tasks/taskNetwork.js';
import { liveRun, removeMarker, writeMarker } from '../stopping/embeddedRunMarker.js';
import { interruptedExitCode, untilAborted, watchInterrupts } from '../stopping/interrupt.js';
import { cancelLeftoverRun } from '../stopping/leftoverRun.js';
import { stopAfterInterrupt } from '../stopping/stopBatch.js';
import { openClientThroughOutage } from '../outage/openClient.js';

export const runUsage = `rollout run --tasks DIR... [--group-size N] [--policy P] [--batch-id ID] [options]
  --tasks        task directories, or directories of tasks (repeatable)
  --group-size   rollouts per task (default 4)
  --policy       scripted:mixed (default), scripted:oracle, scripted:noop, scripted:stall, openai,
                 harness:mini-swe-agent or harness:terminus-2 (a published harness drives the sandbox,
                 its model calls captured; docs/harnesses.md); scripted:adversarial runs the escape
                 suite (with --group-size 8, every attempt once)
  --base-url, --model, --temperature, --seed, --api-key-env   for --policy openai (and a harness's inference server)
  --harness-settings FILE   with --policy harness:NAME: the harness's own settings (JSON)
  --max-tokens N            tokens per turn (default 1024)
  --request-timeout-ms N    time per policy call (default derived from --max-tokens)
  --tool-call-parser LIST   where calls are read from, tried in order: server (default), fenced-json,
                            hermes-tags, bare-json (e.g. server,fenced-json for a model that writes fenced JSON)
  --token-mode MODE         token ids per turn for training: server (default: asked from the server),
                            pipeline (the pipeline renders the prompt and sends token ids: exact prefixes
                            on llama.cpp), off (for APIs that refuse the extra fields); see rollout export
  --chat-template FILE      with --token-mode pipeline: the Jinja chat template to render prompts with instead
                            of the server's (checked before anything starts; its sha256 is on every turn)
  --max-turns N, --verify in-place|clean-room, --min-valid N
  --network none|public     what every sandbox may reach, instead of what each task's format gives it (Harbor:
                            the internet unless task.toml says otherwise); recorded in each rollout's experiment
  --policy-calls queue|local  where each turn's policy call runs: an activity on the policy queue (default;
                            --policy-rate limits it) or a local activity of the rollout's workflow (10 server
                            round trips fewer per 5-turn rollout); docs/inference-server.md
  --attempt-on workflow|host  where each attempt's agent loop runs: in the rollout workflow (default) or in an
                            attempt workflow on its sandbox's host, every call a local activity there (7 server
                            round trips per 5-turn rollout instead of 15-29); docs/benchmarks.md
  --resume replay|restart   after an infra failure at turn k: replay (the next attempt restores turns 0..k-1 into
                            its fresh sandbox by replaying their tool calls, checked against a digest of the files
                            each left, and goes on at turn k without asking the model again; a replay that
                            diverges starts at turn 0) or restart (default: every attempt from turn 0)
  --out FILE     JSONL of rollouts (default <data-dir>/results/<batch>.jsonl)
  --embedded     start a local Temporal dev server and workers first (state in <data-dir>/temporal.sqlite)
  --stay         with --embedded: keep the server and its Web UI up until Ctrl-C
  --verbose      with --embedded: worker logs on the console (default: <data-dir>/logs/worker-<batch>.log)
  --queue-prefix P  submit to the workers started with the same --queue-prefix
  --address, --data-dir`;

function int(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n)) throw new UsageError(`--${name} must be a whole number, got ${JSON.stringify(value)}`);
  return n;
}

function parsePolicyCalls(value: string | undefined): 'queue' | 'local' | undefined {
  if (value === undefined || value === 'queue' || value === 'local') return value;
  throw new UsageError(`--policy-calls is queue or local, got ${JSON.stringify(value)}`);
}

function parseAttemptOn(value: string | undefined): 'workflow' | 'host' | undefined {
  if (value === undefined || value === 'workflow' || value === 'host') return value;
  throw new UsageError(`--attempt-on is workflow or host, got ${JSON.stringify(value)}`);
}

function parseResume(value: string | undefined): 'replay' | 'restart' | undefined {
  if (value === undefined || value === 'replay' || value === 'restart') return value;
  throw new UsageError(`--resume is replay or restart, got ${JSON.stringify(value)}`);
}

async function portOr(preferred: number): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => void freePort().then(resolve));
    s.listen(preferred, '127.0.0.1', () => s.close(() => resolve(preferred)));
  });
}

export async function runCommand(argv: string[]): Promise<number> {
  const { values } = parseCommandLine(argv, {
    command: 'run',
    usage: runUsage,
    options: {
      tasks: { type: 'string', multiple: true },
      'group-size': { type: 'string' },
      policy: { type: 'string', default: 'scripted:mixed' },
      'base-url': { type: 'string' },
      model: { type: 'string' },
      temperature: { type: 'string' },
      seed: { type: 'string' },
      'api-key-env': { type: 'string' },
      'max-tokens': { type: 'string' },
      'token-mode': { type: 'string' },
      'chat-template': { type: 'string' },
      'request-timeout-ms': { type: 'string' },
      'tool-call-parser': { type: 'string' },
      'harness-settings': { type: 'string' },
      'batch-id': { type: 'string' },
      'max-turns': { type: 'string' },
      'min-valid': { type: 'string' },
      verify: { type: 'string' },
      'policy-calls': { type: 'string' },
      'attempt-on': { type: 'string' },
      resume: { type: 'string' },
      network: { type: 'string' },
      out: { type: 'string' },
      embedded: { type: 'boolean', default: false },
      stay: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
      address: { type: 'string' },
      'data-dir': { type: 'string' },
      'queue-prefix': { type: 'string' },
    },
  });
  if (!values.tasks?.length) throw new UsageError(`--tasks is required\n${runUsage}`);
  const verify = parseVerifyMode(values.verify);
  const policyCalls = parsePolicyCalls(values['policy-calls']);
  const attemptOn = parseAttemptOn(values['attempt-on']);
  const resume = parseResume(values.resume);
  let network: NetworkMode | undefined;
  try {
    network = values.network === undefined ? undefined : parseNetworkMode(values.network, '--network');
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const tasks = expandTaskDirs(values.tasks);
  const data = resolveDataDir(values['data-dir']);
  const batchId = values['batch-id'] ?? `batch-${new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14)}`;
  const groupSize = int('group-size', values['group-size'], 4);
  const taskQueues = taskQueuesFor(values['queue-prefix']);
  const options: SubmitBatchOptions = {
    ...(taskQueues ? { taskQueues } : {}),
    batchId,
    tasks,
    groupSize,
    minValid: int('min-valid', values['min-valid'], Math.min(2, groupSize)),
    policy: parsePolicy(values.policy, {
      ...(values['base-url'] ? { baseUrl: values['base-url'] } : {}),
      ...(values.model ? { model: values.model } : {}),
      ...(values.temperature ? { temperature: values.temperature } : {}),
      ...(values.seed ? { seed: values.seed } : {}),
      ...(values['api-key-env'] ? { apiKeyEnv: values['api-key-env'] } : {}),
      ...(values['max-tokens'] ? { maxTokens: values['max-tokens'] } : {}),
      ...(values['request-timeout-ms'] ? { requestTimeoutMs: values['request-timeout-ms'] } : {}),
      ...(values['tool-call-parser'] ? { toolCallParser: values['tool-call-parser'] } : {}),
      ...(values['token-mode'] ? { tokenMode: values['token-mode'] } : {}),
      ...(values['chat-template'] ? { chatTemplate: values['chat-template'] } : {}),
      ...(values['harness-settings'] ? { harnessSettings: values['harness-settings'] } : {}),
    }),
    ...(values['max-turns'] ? { limits: { maxTurns: int('max-turns', values['max-turns'], 30) } } : {}),
    ...(verify ? { verifyMode: verify } : {}),
    ...(policyCalls ? { policyCalls } : {}),
    ...(attemptOn ? { attemptOn } : {}),
    ...(resume ? { failurePolicy: { resume } } : {}),
    ...(network ? { network } : {}),
  };

  // Validate everything before any server or worker starts.
  let inputs;
  try {
    inputs = resolveBatch(options);
  } catch (err) {
    if (err instanceof BatchInputError) throw new UsageError(err.message);
    throw err;
  }

  let server: RunningDevServer | undefined;
  let pipeline: LocalPipeline | undefined;
  let temporalClient: Awaited<ReturnType<typeof openTemporalClient>> | undefined;
  if (values.embedded) {
    const other = liveRun(data);
    if (other) throw new UsageError(`another rollout run --embedded (pid ${other.process.pid}, batch ${other.batchId}) uses ${data}; wait for it, stop it, or pass another --data-dir`);
  }
  // First Ctrl-C/SIGTERM: stop in order (stopAfterInterrupt below); second: kill the server and exit at once.
  const interrupts = watchInterrupts({ onSecond: () => server?.kill() });
  try {
    let temporal: TemporalSettings = temporalSettings(values.address);
    if (values.embedded) {
      mkdirSync(data, { recursive: true });
      server = await startDevServer({
        port: await portOr(7233),
        uiPort: await portOr(8233),
        dbFilename: join(data, 'temporal.sqlite'),
        logFile: join(data, 'temporal-dev-server.log'),
        ownProcessGroup: true,
      });
      temporal = { address: server.address, namespace: server.namespace, tls: undefined, apiKey: undefined };
      const logFile = values.verbose || process.env.LOG_LEVEL ? undefined : join(data, 'logs', `worker-${batchId}.log`);
      pipeline = await startLocalPipeline({ temporal, dataDir: data, ...(taskQueues ? { taskQueues } : {}), stopWithin: { graceMs: 1_000, forceMs: 5_000 }, ...(logFile ? { logFile } : {}) });
      process.stderr.write(`embedded Temporal dev server at ${server.address}, Web UI ${server.uiUrl}\n${logFile ? `worker logs: ${logFile} (--verbose or LOG_LEVEL=info shows them here)\n` : ''}`);
    }
    temporalClient = await openClientThroughOutage(temporal, { signal: interrupts.signal });
    const { client } = temporalClient;
    if (values.embedded) {
      // A run cut short died with its workers: each cancel first waits out its sticky queue (10 s per
      // workflow level) before a new worker takes it, so allow that under load before going on.
      const leftover = await cancelLeftoverRun(client, data, { waitMs: 90_000, except: batchId });
      if (leftover) process.stderr.write(`${leftover}\n`);
      writeMarker(data, batchId, temporal.address);
    }
    const batch = await submitResolvedBatch(client, inputs);
    const reused = batch.groups.filter((g) => !g.started).length;
    process.stderr.write(`batch ${batchId}: ${batch.groups.length} groups × ${groupSize} rollouts${reused ? ` (${reused} already submitted earlier: attached, not restarted)` : ''}\n`);

    const results: GroupResult[] = [];
    const received = new Map<string, GroupResult>();
    const progress = watchProgress(progressDisplay({ batchId, stream: process.stderr }), () => submittedGroupStates(batch.groups, groupSize, received), process.stderr.isTTY ? 500 : 2000);
    try {
      for await (const group of untilAborted(batch.results(), interrupts.signal)) {
        results.push(group);
        received.set(group.workflowId, group);
      }
    } finally {
      await progress.stop();
    }
    const stopped = interrupts.signal.aborted
      ? await stopAfterInterrupt({ client, batchId, address: temporal.address, embedded: values.embedded, signal: String(interrupts.signal.reason), batch, inputs, finished: results, values })
      : undefined;
    results.push(...(stopped?.finished ?? []));

    const out = values.out ?? join(data, 'results', `${batchId}.jsonl`);
    mkdirSync(join(out, '..'), { recursive: true });
    const lines = results.flatMap((g) => g.rollouts.map((r) => JSON.stringify({ batchId, taskId: g.taskId, taskVersion: g.taskVersion, groupStatus: g.status, ...r })));
    writeFileSync(out, `${lines.join('\n')}\n`);
    results.sort((a, b) => a.taskId.localeCompare(b.taskId));
    process.stdout.write(`${summaryTable(results)}\n`);
    process.stdout.write(`rollouts: ${out}\n`);
    if (pipeline) process.stdout.write(`trajectories: ${pipeline.store.locate(batchId)}\n`);
    if (stopped) {
      process.stderr.write(`${stopped.lines.join('\n')}\n`);
      return interruptedExitCode(interrupts.signal);
    }
    if (server?.uiUrl) {
      const query = encodeURIComponent(`RolloutBatch="${batchId}"`);
      process.stdout.write(`Temporal Web UI: ${server.uiUrl}/namespaces/default/workflows?query=${query}\n`);
      if (values.stay) {
        process.stdout.write('the server stays up for the Web UI; Ctrl-C stops it.\n');
        await new Promise<void>((resolve) => interrupts.signal.addEventListener('abort', () => resolve(), { once: true }));
      } else if (existsSync(join(data, 'temporal.sqlite'))) {
        const dataFlag = values['data-dir'] !== undefined ? ` --data-dir ${data}` : '';
        process.stdout.write(
          `(the embedded server stops now; rollout show, status, report and export read this batch from ${join(data, 'temporal.sqlite')} without it,\n` +
            ` e.g. npx rollout export ${batchId} --out ${batchId}.jsonl${dataFlag}; for the Web UI: npx rollout server --db-filename ${join(data, 'temporal.sqlite')})\n`,
        );
      }
    }
    return results.every((g) => g.status === 'complete') ? 0 : 1;
  } finally {
    if (interrupts.signal.aborted && server) process.stderr.write('stopping the workers and the embedded dev server...\n');
    await temporalClient?.close();
    await pipeline?.stop();
    await server?.stop();
    if (values.embedded) removeMarker(data);
    if (interrupts.signal.aborted && server) process.stderr.write('stopped the workers and the embedded dev server.\n');
    interrupts.dispose();
  }
}
