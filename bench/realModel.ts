/**
 * Section 6: a rollout with a real model, where its time goes; and the same measured with a
 * scripted policy that answers after 1 s (the bench task), where the model's noise is gone. llama.cpp
 * (xllamacpp) serving Qwen2.5-Coder-0.5B-Instruct on 127.0.0.1, a fresh
 * Temporal dev server, this machine's workers in this process, the sample
 * tasks. From the same run:
 * - per turn, from the clocks the steps keep in the trajectory (bench/turnStages.ts): wall time
 *   (one model call to the next), model time (the HTTP call), tool time (the commands in the
 *   sandbox) and the pipeline's own time (the rest), split by stage;
 * - per rollout: wall time (workflow start to close) and the fraction that is
 *   not the model's, split into tools, sandbox lifecycle (provision, verify,
 *   teardown) and orchestration.
 * Skipped with the reason when ROLLOUT_MODEL_GGUF is not set (scripts/ensure-model.sh).
 */
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tsToMs } from '@temporalio/common/lib/time.js';
import { loadTrajectory } from '../client/loadTrajectory.js';
import { submitBatch } from '../client/submitBatch.js';
import type { GroupResult } from '../shared/pipeline.js';
import { summarize, type Summary } from '../shared/stats.js';
import { llamaSetupFromEnv, startLlamaServer } from '../servers/inference/llamaServer.js';
import { startLocalPipeline } from '../workers/startLocalPipeline.js';
import { openTemporalClient } from '../workers/temporalConnection.js';
import { startDevServer } from '../servers/temporalDevServer.js';
import type { Client } from '@temporalio/client';
import type { TrajectoryStore } from '../stores/trajectoryStore.js';
import type { BenchContext } from './context.js';
import { OWN_STAGES, turnStages, type OwnStage } from './turnStages.js';
import { benchPolicy, createBenchTask, startBenchPolicyServer } from './workload.js';
import { formatTable } from './stats.js';

const EXAMPLES = resolve(dirname(fileURLToPath(import.meta.url)), '../examples/tasks');

export interface RealModelOptions {
  tasks: string[];
  groupSize: number;
  maxTurns: number;
  maxTokens: number;
  /** Server slots; the group's rollouts run at once, so one per rollout keeps calls from waiting for a slot. */
  parallel: number;
}

/** Where one pass's time went. */
export interface PassResult {
  rollouts: number;
  turns: number;
  outcomes: Record<string, number>;
  rewards: Record<string, (number | null)[]>;
  perTurn: { wallMs: Summary; modelMs: Summary; toolMs: Summary; pipelineMs: Summary; stages: Record<OwnStage, Summary>; completionTokens: Summary; tokensPerSecond: Summary };
  perRollout: { wallMs: Summary; modelShare: Summary; notModelShare: Summary; toolShare: Summary; sandboxLifecycleShare: Summary; admissionShare: Summary; orchestrationShare: Summary };
  /** Over all rollouts: 1 - model time / wall time. */
  notModelFraction: number;
}

export type RealModelResult =
  | { skipped: string }
  | {
      skipped?: undefined;
      serverReadyMs: number;
      template: string;
      /** group.policyCalls and group.attemptOn of both passes. */
      placement: string;
      /** The real model on the sample tasks. */
      model: PassResult;
      /** The bench task with a scripted policy that answers every call after 1 s. */
      scripted: PassResult;
    };

/** Per-turn stages from the trajectory records' clocks; per-rollout shares from the results' timings. */
async function measurePass(store: TrajectoryStore, client: Client, groups: GroupResult[]): Promise<PassResult> {
  const turn = { wall: [] as number[], model: [] as number[], tool: [] as number[], pipeline: [] as number[], tokens: [] as number[], tps: [] as number[] };
  const stages = Object.fromEntries(OWN_STAGES.map((k) => [k, [] as number[]])) as Record<OwnStage, number[]>;
  const roll = { wall: [] as number[], model: [] as number[], notModel: [] as number[], tool: [] as number[], lifecycle: [] as number[], admission: [] as number[], orchestration: [] as number[] };
  let wallTotal = 0;
  let modelTotal = 0;
  const outcomes: Record<string, number> = {};
  for (const g of groups) {
    for (const r of g.rollouts) {
      const key = `${r.outcomeClass}/${r.outcomeType}`;
      outcomes[key] = (outcomes[key] ?? 0) + 1;
      const attempts = await loadTrajectory(store, r.trajectoryRef);
      for (const t of turnStages(attempts)) {
        turn.wall.push(t.wallMs);
        turn.model.push(t.modelMs);
        turn.tool.push(t.toolMs);
        turn.pipeline.push(t.ownMs);
        for (const k of OWN_STAGES) stages[k].push(t.own[k]);
      }
      let rolloutModel = 0;
      let rolloutTool = 0;
      let rolloutAdmission = 0;
      for (const t of attempts.flatMap((a) => a.turns)) {
        rolloutModel += t.policy.latencyMs;
        rolloutAdmission += t.policy.admission?.waitedMs ?? 0;
        rolloutTool += t.tools.reduce((s, x) => s + x.durationMs, 0);
        const completion = t.policy.usage?.completion_tokens;
        if (completion !== undefined) {
          turn.tokens.push(completion);
          turn.tps.push(completion / (t.policy.latencyMs / 1000));
        }
      }
      const events = (await client.workflow.getHandle(r.workflowId).fetchHistory()).events ?? [];
      const first = events[0];
      const last = events.at(-1);
      const wall = first && last ? tsToMs(last.eventTime) - tsToMs(first.eventTime) : 0;
      if (wall <= 0) continue;
      const lifecycle = r.timings.provisionMs + r.timings.verifyMs + r.timings.teardownMs;
      roll.wall.push(wall);
      roll.model.push(rolloutModel / wall);
      roll.notModel.push(1 - rolloutModel / wall);
      roll.tool.push(rolloutTool / wall);
      roll.lifecycle.push(lifecycle / wall);
      roll.admission.push(rolloutAdmission / wall);
      roll.orchestration.push(Math.max(0, wall - rolloutModel - rolloutTool - lifecycle - rolloutAdmission) / wall);
      wallTotal += wall;
      modelTotal += rolloutModel;
    }
  }
  return {
    rollouts: roll.wall.length,
    turns: turn.wall.length,
    outcomes,
    rewards: Object.fromEntries(groups.map((g) => [g.taskId, g.rollouts.map((r) => r.reward)])),
    perTurn: {
      wallMs: summarize(turn.wall),
      modelMs: summarize(turn.model),
      toolMs: summarize(turn.tool),
      pipelineMs: summarize(turn.pipeline),
      stages: Object.fromEntries(OWN_STAGES.map((k) => [k, summarize(stages[k])])) as Record<OwnStage, Summary>,
      completionTokens: summarize(turn.tokens),
      tokensPerSecond: summarize(turn.tps),
    },
    perRollout: {
      wallMs: summarize(roll.wall),
      modelShare: summarize(roll.model),
      notModelShare: summarize(roll.notModel),
      toolShare: summarize(roll.tool),
      sandboxLifecycleShare: summarize(roll.lifecycle),
      admissionShare: summarize(roll.admission),
      orchestrationShare: summarize(roll.orchestration),
    },
    notModelFraction: wallTotal > 0 ? 1 - modelTotal / wallTotal : Number.NaN,
  };
}

async function collect(batch: Awaited<ReturnType<typeof submitBatch>>): Promise<GroupResult[]> {
  const groups: GroupResult[] = [];
  for await (const g of batch.results()) groups.push(g);
  return groups;
}

export async function runRealModel(ctx: BenchContext, options: RealModelOptions): Promise<RealModelResult> {
  const setup = llamaSetupFromEnv();
  if ('missing' in setup) return { skipped: setup.missing };
  const dir = join(ctx.scratch, 'real-model');
  mkdirSync(dir, { recursive: true });
  const llama = await startLlamaServer({ ...setup, parallel: options.parallel, ctx: 4096 * options.parallel, logFile: join(dir, 'llama-server.log') });
  const server = await startDevServer({ uiPort: false, logFile: join(dir, 'temporal.log') });
  const temporal = { address: server.address, namespace: server.namespace, tls: undefined, apiKey: undefined };
  const taskQueues = { main: 'bench-real-model', policy: 'bench-real-model-policy' };
  const pipeline = await startLocalPipeline({ temporal, dataDir: dir, taskQueues, hostId: 'bench-real-model' });
  const { client, close } = await openTemporalClient(temporal);
  const scriptedServer = await startBenchPolicyServer(1_000);
  const placement = ctx.placement ?? {};
  try {
    ctx.log(
      `llama.cpp ready in ${Math.round(llama.readyMs)} ms (template ${llama.template.source}); ${options.tasks.length} tasks × ${options.groupSize}, max ${options.maxTurns} turns, max_tokens ${options.maxTokens}; placement ${JSON.stringify(placement)}`,
    );
    const modelGroups = await collect(
      await submitBatch(client, {
        batchId: `bench-real-model-${Date.now()}`,
        taskQueues,
        tasks: options.tasks.map((t) => join(EXAMPLES, t)),
        groupSize: options.groupSize,
        minValid: 1,
        limits: { maxTurns: options.maxTurns },
        ...placement,
        policy: {
          kind: 'openai',
          baseUrl: llama.baseUrl,
          model: 'qwen2.5-coder-0.5b-instruct-q4_k_m',
          sampling: { seed: 1, temperature: 0.7, max_tokens: options.maxTokens },
          requestTimeoutMs: 280_000,
          toolCallParser: ['server', 'fenced-json', 'hermes-tags', 'bare-json'],
        },
      }),
    );
    const model = await measurePass(pipeline.store, client, modelGroups);
    ctx.log(`  real model: ${model.turns} turns measured; now the scripted policy at 1 s per turn`);
    const scriptedGroups = await collect(
      await submitBatch(client, {
        batchId: `bench-scripted-1s-${Date.now()}`,
        taskQueues,
        tasks: [createBenchTask(join(dir, 'tasks'))],
        groupSize: options.groupSize,
        minValid: 1,
        ...placement,
        policy: benchPolicy(scriptedServer),
      }),
    );
    const scripted = await measurePass(pipeline.store, client, scriptedGroups);
    return { serverReadyMs: llama.readyMs, template: `${llama.template.source} ${llama.template.sha256.slice(0, 16)}`, placement: JSON.stringify(placement), model, scripted };
  } finally {
    await scriptedServer.close();
    await close();
    await pipeline.stop();
    await server.stop();
    await llama.stop();
  }
}

const STAGE_LABELS: Record<OwnStage, string> = {
  policyToTools: '  model answer -> first command (record, dispatch)',
  toolPrep: '  tool step -> its command (trajectory reads)',
  betweenTools: '  between the commands of a turn',
  toolsToPolicy: '  last command -> next policy step (record, dispatch)',
  policyPrep: '  policy step -> its model call (conversation rebuild)',
};

function formatPass(title: string, r: PassResult): string {
  const ms = (s: Summary): string[] => [s.p50, s.mean, s.p95].map((v) => (Number.isFinite(v) ? Math.round(v).toString() : '-'));
  const pct = (s: Summary): string[] => [s.p50, s.mean, s.p95].map((v) => (Number.isFinite(v) ? `${(v * 100).toFixed(1)}%` : '-'));
  const num = (s: Summary): string[] => [s.p50, s.mean, s.p95].map((v) => (Number.isFinite(v) ? v.toFixed(1) : '-'));
  return [
    `${title}: ${r.rollouts} rollouts, ${r.turns} turns measured; outcomes ${JSON.stringify(r.outcomes)}; rewards ${JSON.stringify(r.rewards)}`,
    formatTable(
      ['per turn', 'p50', 'mean', 'p95'],
      [
        ['wall ms (model call to the next)', ...ms(r.perTurn.wallMs)],
        ['model ms (the HTTP call)', ...ms(r.perTurn.modelMs)],
        ['tool ms (commands in the sandbox)', ...ms(r.perTurn.toolMs)],
        ["pipeline's own ms (the rest)", ...ms(r.perTurn.pipelineMs)],
        ...OWN_STAGES.map((k) => [STAGE_LABELS[k], ...ms(r.perTurn.stages[k])]),
        ['completion tokens', ...num(r.perTurn.completionTokens)],
        ['tokens/s over the call (prompt included)', ...num(r.perTurn.tokensPerSecond)],
      ],
    ),
    formatTable(
      ['per rollout', 'p50', 'mean', 'p95'],
      [
        ['wall ms (workflow start to close)', ...ms(r.perRollout.wallMs)],
        ['model share', ...pct(r.perRollout.modelShare)],
        ['not the model: all', ...pct(r.perRollout.notModelShare)],
        ['  tools', ...pct(r.perRollout.toolShare)],
        ['  provision + verify + teardown', ...pct(r.perRollout.sandboxLifecycleShare)],
        ['  waiting for room on the server (admission)', ...pct(r.perRollout.admissionShare)],
        ['  orchestration (the rest)', ...pct(r.perRollout.orchestrationShare)],
      ],
    ),
    `fraction of rollout wall time that is not the model's: ${(r.notModelFraction * 100).toFixed(1)}%`,
  ].join('\n');
}

export function formatRealModel(r: RealModelResult): string {
  if (r.skipped !== undefined) return `skipped: ${r.skipped}`;
  return [
    `server ready in ${Math.round(r.serverReadyMs)} ms, template ${r.template}; placement ${r.placement} (goal: the pipeline's own time per turn at most 50 ms p50)`,
    formatPass('real model', r.model),
    formatPass('scripted policy, 1 s per call (bench task, 5 turns)', r.scripted),
  ].join('\n\n');
}
