/**
 * Section 6: a rollout with a real model, where its time goes. llama.cpp
 * (xllamacpp) serving Qwen2.5-Coder-0.5B-Instruct on 127.0.0.1, a fresh
 * Temporal dev server, this machine's workers in this process, the sample
 * tasks. From the same run:
 * - per turn: wall time (policyStep scheduled to the next policyStep or the
 *   verify, from the workflow history), model time (the HTTP call to the
 *   server, measured in the policy activity), tool time (the commands in the
 *   sandbox, measured in the tool activity) and the pipeline's own time (the
 *   rest: workflow tasks, activity dispatch, trajectory store, conversation
 *   rebuild);
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
import { llamaSetupFromEnv, startLlamaServer } from '../workers/inference/llamaServer.js';
import { startLocalPipeline } from '../workers/startLocalPipeline.js';
import { openTemporalClient } from '../workers/temporalConnection.js';
import { startDevServer } from '../workers/temporalDevServer.js';
import type { BenchContext } from './context.js';
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

export type RealModelResult =
  | { skipped: string }
  | {
      skipped?: undefined;
      serverReadyMs: number;
      template: string;
      rollouts: number;
      turns: number;
      outcomes: Record<string, number>;
      rewards: Record<string, (number | null)[]>;
      perTurn: { wallMs: Summary; modelMs: Summary; toolMs: Summary; pipelineMs: Summary; completionTokens: Summary; tokensPerSecond: Summary };
      perRollout: { wallMs: Summary; modelShare: Summary; notModelShare: Summary; toolShare: Summary; sandboxLifecycleShare: Summary; orchestrationShare: Summary };
      /** Over all rollouts: 1 - model time / wall time. */
      notModelFraction: number;
    };

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
  try {
    ctx.log(`llama.cpp ready in ${Math.round(llama.readyMs)} ms (template ${llama.template.source}); ${options.tasks.length} tasks × ${options.groupSize}, max ${options.maxTurns} turns, max_tokens ${options.maxTokens}`);
    const batch = await submitBatch(client, {
      batchId: `bench-real-model-${Date.now()}`,
      taskQueues,
      tasks: options.tasks.map((t) => join(EXAMPLES, t)),
      groupSize: options.groupSize,
      minValid: 1,
      limits: { maxTurns: options.maxTurns },
      policy: {
        kind: 'openai',
        baseUrl: llama.baseUrl,
        model: 'qwen2.5-coder-0.5b-instruct-q4_k_m',
        sampling: { seed: 1, temperature: 0.7, max_tokens: options.maxTokens },
        requestTimeoutMs: 280_000,
        toolCallParser: ['server', 'fenced-json', 'hermes-tags', 'bare-json'],
      },
    });
    const groups: GroupResult[] = [];
    for await (const g of batch.results()) groups.push(g);

    const turn = { wall: [] as number[], model: [] as number[], tool: [] as number[], pipeline: [] as number[], tokens: [] as number[], tps: [] as number[] };
    const roll = { wall: [] as number[], model: [] as number[], notModel: [] as number[], tool: [] as number[], lifecycle: [] as number[], orchestration: [] as number[] };
    let wallTotal = 0;
    let modelTotal = 0;
    const outcomes: Record<string, number> = {};
    for (const g of groups) {
      for (const r of g.rollouts) {
        const key = `${r.outcomeClass}/${r.outcomeType}`;
        outcomes[key] = (outcomes[key] ?? 0) + 1;
        const attempts = await loadTrajectory(pipeline.store, r.trajectoryRef);
        const history = await client.workflow.getHandle(r.workflowId).fetchHistory();
        const events = history.events ?? [];
        const stepStarts = events
          .filter((e) => ['policyStep', 'verifyAttempt'].includes(e.activityTaskScheduledEventAttributes?.activityType?.name ?? ''))
          .map((e) => ({ name: e.activityTaskScheduledEventAttributes?.activityType?.name, at: tsToMs(e.eventTime) }));
        const turns = attempts.flatMap((a) => a.turns);
        let rolloutModel = 0;
        let rolloutTool = 0;
        for (const [i, t] of turns.entries()) {
          const start = stepStarts[i];
          const next = stepStarts[i + 1];
          const tools = t.tools.reduce((s, x) => s + x.durationMs, 0);
          rolloutModel += t.policy.latencyMs;
          rolloutTool += tools;
          const completion = t.policy.usage?.completion_tokens;
          if (completion !== undefined) {
            turn.tokens.push(completion);
            turn.tps.push(completion / (t.policy.latencyMs / 1000));
          }
          if (!start || start.name !== 'policyStep' || !next) continue;
          const wall = next.at - start.at;
          turn.wall.push(wall);
          turn.model.push(t.policy.latencyMs);
          turn.tool.push(tools);
          turn.pipeline.push(Math.max(0, wall - t.policy.latencyMs - tools));
        }
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
        roll.orchestration.push(Math.max(0, wall - rolloutModel - rolloutTool - lifecycle) / wall);
        wallTotal += wall;
        modelTotal += rolloutModel;
      }
    }
    return {
      serverReadyMs: llama.readyMs,
      template: `${llama.template.source} ${llama.template.sha256.slice(0, 16)}`,
      rollouts: roll.wall.length,
      turns: turn.wall.length,
      outcomes,
      rewards: Object.fromEntries(groups.map((g) => [g.taskId, g.rollouts.map((r) => r.reward)])),
      perTurn: { wallMs: summarize(turn.wall), modelMs: summarize(turn.model), toolMs: summarize(turn.tool), pipelineMs: summarize(turn.pipeline), completionTokens: summarize(turn.tokens), tokensPerSecond: summarize(turn.tps) },
      perRollout: {
        wallMs: summarize(roll.wall),
        modelShare: summarize(roll.model),
        notModelShare: summarize(roll.notModel),
        toolShare: summarize(roll.tool),
        sandboxLifecycleShare: summarize(roll.lifecycle),
        orchestrationShare: summarize(roll.orchestration),
      },
      notModelFraction: wallTotal > 0 ? 1 - modelTotal / wallTotal : Number.NaN,
    };
  } finally {
    await close();
    await pipeline.stop();
    await server.stop();
    await llama.stop();
  }
}

export function formatRealModel(r: RealModelResult): string {
  if (r.skipped !== undefined) return `skipped: ${r.skipped}`;
  const ms = (s: Summary): string[] => [s.p50, s.mean, s.p95].map((v) => (Number.isFinite(v) ? Math.round(v).toString() : '-'));
  const pct = (s: Summary): string[] => [s.p50, s.mean, s.p95].map((v) => (Number.isFinite(v) ? `${(v * 100).toFixed(1)}%` : '-'));
  const num = (s: Summary): string[] => [s.p50, s.mean, s.p95].map((v) => (Number.isFinite(v) ? v.toFixed(1) : '-'));
  return [
    `server ready in ${Math.round(r.serverReadyMs)} ms, template ${r.template}; ${r.rollouts} rollouts, ${r.turns} turns measured`,
    `outcomes ${JSON.stringify(r.outcomes)}; rewards ${JSON.stringify(r.rewards)}`,
    formatTable(
      ['per turn', 'p50', 'mean', 'p95'],
      [
        ['wall ms', ...ms(r.perTurn.wallMs)],
        ['model ms (HTTP call to llama.cpp)', ...ms(r.perTurn.modelMs)],
        ['tool ms (commands in the sandbox)', ...ms(r.perTurn.toolMs)],
        ["pipeline's own ms (the rest)", ...ms(r.perTurn.pipelineMs)],
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
        ['  orchestration (the rest)', ...pct(r.perRollout.orchestrationShare)],
      ],
    ),
    `fraction of rollout wall time that is not the model's: ${(r.notModelFraction * 100).toFixed(1)}% (goal: at most 10%)`,
  ].join('\n');
}
