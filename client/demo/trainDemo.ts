/**
 * `npm run demo:train -- [--tasks DIR]... [--steps N] [--group-size G] [--lr X] [--max-turns N]`: the
 * training loop closed on this machine. Starts llama.cpp serving Qwen2.5-Coder-0.5B, a local Temporal
 * dev server and the workers, then for each step: a batch of rollouts with the real model at the
 * current policy version, exported; one GRPO step by the Python trainer on it (LoRA, continuing from
 * the previous step's state); the adapter converted by llama.cpp's converter and the server restarted
 * with it (client/training/weightSync.ts); the policy version advanced for the next batch. A last batch
 * runs on the last weights. One line per batch: mean reward, how many rollouts were valid, the
 * train-inference mismatch the trainer measured on that batch (the server at that version against
 * the trainer's weights of that version), and the time of each stage. Needs `bash scripts/setup.sh
 * train` (the model, the trainer's venv, the converter); nothing is downloaded here. The trainer's
 * state of each step stays in <data-dir>/train/<run>/step-<k>. Ctrl-C or SIGTERM stops it in order
 * (the trainer, the workers, the Temporal server, the inference server); a second one kills the servers.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { exportBatch } from '../export/exportBatch.js';
import { submitBatch } from '../submitBatch.js';
import { runTrainerStep, TrainerStepError, type TrainerStepReport } from '../training/trainerStep.js';
import { syncAdapter, WeightSyncError } from '../training/weightSync.js';
import { HelpRequested, parseCommandLine } from '../cli/commandLine.js';
import { expandTaskDirs, positiveInt } from '../cli/cliSettings.js';
import { UsageError } from '../cli/usageError.js';
import { interruptedExitCode, untilAborted, watchInterrupts } from '../stopping/interrupt.js';
import type { GroupResult, PolicyConfig } from '../../shared/pipeline.js';
import { llamaSetupFromEnv, startLlamaServer, type LlamaServerOptions, type RunningLlamaServer } from '../../servers/inference/llamaServer.js';
import { freePort, startDevServer, type RunningDevServer } from '../../servers/temporalDevServer.js';
import { startLocalPipeline, type LocalPipeline } from '../../workers/startLocalPipeline.js';
import { openTemporalClient } from '../../workers/temporalConnection.js';
import { DEMO_MODEL_NAME, DEMO_TOOL_CALL_PARSERS } from './modelDemoSettings.js';

const usage = `npm run demo:train -- [--tasks DIR]... [--steps N] [--group-size G] [--lr X] [--max-turns N] [--max-tokens N]
  --tasks       task directories (default examples/tasks/write-greeting)
  --steps       training steps (default 3); steps + 1 batches run
  --group-size  rollouts per task and batch (default 8)
  --lr          the trainer's learning rate (default 1e-3)
  --max-turns   turns per rollout (default 4)
  --max-tokens  tokens per model call (default 256)`;

interface BatchRow {
  version: number;
  meanReward: number;
  valid: number;
  rollouts: number;
  exported: number;
  rolloutsS: number;
  step?: TrainerStepReport;
  trainS?: number;
  syncS?: number;
  note?: string;
}

function formatRow(r: BatchRow): string {
  const m = r.step?.mismatch;
  return [
    String(r.version).padStart(7),
    r.meanReward.toFixed(3).padStart(11),
    `${r.valid}/${r.rollouts}`.padStart(7),
    String(r.exported).padStart(8),
    (m ? m.mean_k3_kl.toExponential(1) : '-').padStart(8),
    (m ? m.mean_abs_delta.toFixed(4) : '-').padStart(9),
    r.rolloutsS.toFixed(0).padStart(10),
    (r.trainS !== undefined ? r.trainS.toFixed(0) : '-').padStart(7),
    (r.syncS !== undefined ? r.syncS.toFixed(1) : '-').padStart(6),
    r.note ? `  ${r.note}` : '',
  ].join(' ');
}
const HEADER = 'version mean reward   valid exported  k3 KL  mean|d|  rollouts s train s sync s';

async function main(argv: string[]): Promise<number> {
  const { values } = parseCommandLine(argv, {
    command: 'demo:train',
    invocation: 'npm run demo:train --',
    usage,
    options: {
      tasks: { type: 'string', multiple: true },
      steps: { type: 'string' },
      'group-size': { type: 'string' },
      lr: { type: 'string' },
      'max-turns': { type: 'string' },
      'max-tokens': { type: 'string' },
    },
  });
  const steps = positiveInt('steps', values.steps, 3);
  const groupSize = positiveInt('group-size', values['group-size'], 8);
  const lr = values.lr === undefined ? 1e-3 : Number(values.lr);
  if (!(lr > 0)) throw new UsageError(`--lr must be a positive number, got ${JSON.stringify(values.lr)}`);
  const maxTurns = positiveInt('max-turns', values['max-turns'], 4);
  const maxTokens = positiveInt('max-tokens', values['max-tokens'], 256);
  const tasks = expandTaskDirs(values.tasks ?? ['examples/tasks/write-greeting']);
  const setup = llamaSetupFromEnv();
  const trainPython = process.env.ROLLOUT_TRAIN_PYTHON;
  if ('missing' in setup) throw new UsageError(setup.missing);
  if (!trainPython) throw new UsageError("ROLLOUT_TRAIN_PYTHON is not set: run eval \"$(bash scripts/setup.sh train)\" (the trainer's venv and llama.cpp's LoRA converter)");
  if (!process.env.ROLLOUT_LORA_CONVERTER) throw new UsageError('ROLLOUT_LORA_CONVERTER is not set: run eval "$(bash scripts/setup.sh train)"');

  const data = resolve(process.env.ROLLOUT_DATA_DIR ?? '.rollout');
  const run = `train-${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '')}`;
  const runDir = join(data, 'train', run);
  mkdirSync(runDir, { recursive: true });
  const llamaOptions: LlamaServerOptions = { ...setup, parallel: 4, ctx: 16384, threads: 1, logFile: join(runDir, 'llama-server.log') };
  let llama: RunningLlamaServer | undefined;
  let server: RunningDevServer | undefined;
  let pipeline: LocalPipeline | undefined;
  let closeClient: (() => Promise<void>) | undefined;
  const interrupts = watchInterrupts({
    onSecond: () => {
      server?.kill();
      if (llama) process.kill(llama.pid, 'SIGKILL');
    },
  });
  const stopped = interrupts.signal;
  try {
    llama = await startLlamaServer(llamaOptions);
    server = await startDevServer({
      port: await freePort(),
      uiPort: await freePort(),
      dbFilename: join(runDir, 'temporal.sqlite'),
      logFile: join(runDir, 'temporal-dev-server.log'),
      ownProcessGroup: true,
    });
    const temporal = { address: server.address, namespace: server.namespace, tls: undefined, apiKey: undefined };
    pipeline = await startLocalPipeline({ temporal, dataDir: runDir, stopWithin: { graceMs: 1_000, forceMs: 5_000 }, logFile: join(runDir, 'worker.log') });
    const opened = await openTemporalClient(temporal);
    closeClient = opened.close;
    process.stderr.write(`demo:train ${run}: ${tasks.length} task(s) × ${groupSize} rollouts, ${steps} steps, lr ${lr}; Web UI ${server.uiUrl}; state in ${runDir}\n`);
    process.stdout.write(`${HEADER}\n`);

    const rows: BatchRow[] = [];
    let version = 0;
    let trainerState: string | undefined;
    for (let k = 0; k <= steps && !stopped.aborted; k++) {
      const policy: PolicyConfig = {
        kind: 'openai',
        baseUrl: llama.baseUrl,
        model: DEMO_MODEL_NAME,
        // No temperature: the RL default (1, no truncation), so the logprobs are the sampling distribution's.
        sampling: { seed: 1000 + k, max_tokens: maxTokens },
        requestTimeoutMs: 280_000,
        toolCallParser: DEMO_TOOL_CALL_PARSERS,
        tokens: { mode: 'pipeline', chatTemplate: llama.template.file },
      };
      const batchId = `${run}-v${version}-b${k}`;
      let started = performance.now();
      const batch = await submitBatch(opened.client, { batchId, tasks, groupSize, minValid: 2, policy, limits: { maxTurns }, policyVersion: version });
      const groups: GroupResult[] = [];
      for await (const g of untilAborted(batch.results(), stopped)) groups.push(g);
      if (stopped.aborted) break;
      const rolloutsS = (performance.now() - started) / 1000;
      // Masked rollouts (an infra failure past its retries) have no reward and are not averaged in.
      const rewards = groups.flatMap((g) => g.rollouts.flatMap((r) => (r.reward === null ? [] : [r.reward])));
      const samplesFile = join(runDir, `batch-${k}.jsonl`);
      const exported = await exportBatch(opened.client, pipeline.store, batchId, samplesFile);
      const row: BatchRow = {
        version,
        meanReward: rewards.reduce((a, b) => a + b, 0) / Math.max(1, rewards.length),
        valid: groups.reduce((n, g) => n + g.validCount, 0),
        rollouts: rewards.length,
        exported: exported.exported,
        rolloutsS,
      };
      const versions = new Set(readFileSync(samplesFile, 'utf8').trim().split('\n').filter(Boolean).flatMap((l) => (JSON.parse(l) as { policy_versions: number[] }).policy_versions));
      if ([...versions].some((v) => v !== version)) row.note = `turns recorded versions ${[...versions].join(',')}, expected ${version}`;
      if (k < steps) {
        const out = join(runDir, `step-${k + 1}`);
        started = performance.now();
        try {
          row.step = await runTrainerStep({ python: trainPython, samples: samplesFile, gguf: setup.model, out, lr, signal: stopped, ...(trainerState ? { resume: trainerState } : {}) });
          row.trainS = (performance.now() - started) / 1000;
          started = performance.now();
          const synced = await syncAdapter(llama, llamaOptions, row.step.adapter_gguf?.path ?? join(out, 'adapter.gguf'));
          llama = synced.server;
          row.syncS = (performance.now() - started) / 1000;
          trainerState = out;
          version += 1;
        } catch (err) {
          if (err instanceof WeightSyncError) {
            llama = err.server;
            if (!llama) throw err;
          } else if (!(err instanceof TrainerStepError)) throw err;
          // A batch the trainer refuses (every advantage 0: no signal) or a sync that failed: the weights and the version stay.
          row.note = `${row.note ? `${row.note}; ` : ''}no new weights: ${err.message.split('\n').slice(-1)[0]?.slice(0, 160)}`;
        }
      }
      rows.push(row);
      process.stdout.write(`${formatRow(row)}\n`);
    }
    if (stopped.aborted) {
      process.stderr.write(`demo:train: ${String(stopped.reason)}: stopped after ${rows.length} batch(es); stopping the workers and servers\n`);
      return interruptedExitCode(stopped);
    }
    const first = rows[0] as BatchRow;
    const last = rows.at(-1) as BatchRow;
    process.stdout.write(
      `mean reward ${first.meanReward.toFixed(3)} at version ${first.version} -> ${last.meanReward.toFixed(3)} at version ${last.version} (${rows.length} batches of ${first.rollouts} rollouts)\n`,
    );
    return 0;
  } finally {
    interrupts.dispose();
    await closeClient?.();
    await pipeline?.stop();
    await server?.stop();
    await llama?.stop();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof HelpRequested) {
      process.stdout.write(`${err.usage}\n`);
      process.exit(0);
    }
    process.stderr.write(`demo:train: ${err instanceof UsageError ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
