/**
 * `npx tsx bench/resumeRealModel.ts [--task DIR] [--kill-after-turn K] [--seeds 1,2,3]` (bash scripts/with-env.sh --for model):
 * what an infra failure costs with a real model, restarted or resumed. llama.cpp (xllamacpp) serving
 * Qwen2.5-Coder-0.5B-Instruct, the local dev server and sandboxes: one rollout per seed and resume mode;
 * once turn K's command has run, its sandbox is killed (the model is then answering turn K+1). Prints,
 * per mode, the model calls and completion tokens in all and those spent again after the failure (calls
 * asked again = calls in all minus the turns of the rollout's final trajectory), the replay's time per
 * restored call, and the rollout's wall time.
 */
import { join, resolve, dirname } from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import type { PolicyTurnRecord } from '../agent/conversation.js';
import { loadTrajectory } from '../client/loadTrajectory.js';
import { submitBatch } from '../client/submitBatch.js';
import type { GroupResult, RolloutResult } from '../shared/pipeline.js';
import { localHandle } from '../shared/sandbox.js';
import { llamaSetupFromEnv, startLlamaServer } from '../servers/inference/llamaServer.js';
import { startLocalPipeline } from '../workers/startLocalPipeline.js';
import { openTemporalClient } from '../workers/temporalConnection.js';
import { startDevServer } from '../servers/temporalDevServer.js';

const EXAMPLES = resolve(dirname(fileURLToPath(import.meta.url)), '../examples/tasks');

interface Run {
  mode: 'restart' | 'replay';
  seed: number;
  killed: boolean;
  result: RolloutResult;
  calls: number;
  callsAgain: number;
  tokens: number;
  tokensAgain: number;
  replayPerCallMs: number | null;
  wallMs: number;
}

const { values } = parseArgs({
  options: {
    task: { type: 'string', default: join(EXAMPLES, 'fix-median') },
    'kill-after-turn': { type: 'string', default: '2' },
    seeds: { type: 'string', default: '1,2,3' },
    'max-turns': { type: 'string', default: '10' },
  },
});
const killAfter = Number(values['kill-after-turn']);
const setup = llamaSetupFromEnv();
if ('missing' in setup) throw new Error(`no model here: ${setup.missing} (bash scripts/with-env.sh --for model)`);
const dir = mkdtempSync(join(tmpdir(), 'resume-real-model-'));
const llama = await startLlamaServer({ ...setup, parallel: 1, ctx: 8192, logFile: join(dir, 'llama-server.log') });
const server = await startDevServer({ uiPort: false, logFile: join(dir, 'temporal.log') });
const temporal = { address: server.address, namespace: server.namespace, tls: undefined, apiKey: undefined };
const taskQueues = { main: 'bench-resume', policy: 'bench-resume-policy' };
const pipeline = await startLocalPipeline({ temporal, dataDir: dir, taskQueues, hostId: 'bench-resume', logFile: join(dir, 'worker.log') });
const { client, close } = await openTemporalClient(temporal);
const runs: Run[] = [];
try {
  for (const seed of values.seeds.split(',').map(Number)) {
    for (const mode of ['restart', 'replay'] as const) {
      const batchId = `bench-resume-${mode}-${seed}-${Date.now()}`;
      const started = Date.now();
      const batch = await submitBatch(client, {
        batchId,
        taskQueues,
        tasks: [values.task],
        groupSize: 1,
        minValid: 1,
        limits: { maxTurns: Number(values['max-turns']) },
        failurePolicy: { infra: { retries: 1, backoffSec: 1, onExhausted: 'mask' }, resume: mode },
        policy: {
          kind: 'openai',
          baseUrl: llama.baseUrl,
          model: 'qwen2.5-coder-0.5b-instruct-q4_k_m',
          sampling: { seed, temperature: 0.7, max_tokens: 256 },
          requestTimeoutMs: 280_000,
          toolCallParser: ['server', 'fenced-json', 'hermes-tags', 'bare-json'],
        },
      });
      const ref = `${batchId}/${batch.groups[0]?.taskId}/0`;
      const done = (async (): Promise<GroupResult[]> => {
        const out: GroupResult[] = [];
        for await (const g of batch.results()) out.push(g);
        return out;
      })();
      // Kill once turn K's command has run (the model then answers turn K+1), unless the rollout ended first.
      let killed = false;
      let finished = false;
      void done.then(() => (finished = true));
      while (!finished && !killed) {
        const names = await pipeline.store.list(ref, 'attempt-00/').catch((): string[] => []);
        if (names.some((n) => n.startsWith(`attempt-00/turn-${String(killAfter).padStart(4, '0')}.tool-`))) {
          for (const record of await pipeline.provider.list({ batch: batchId })) if (record.handle) process.kill(localHandle(record.handle).pid, 'SIGKILL');
          killed = true;
        } else await new Promise((r) => setTimeout(r, 200));
      }
      const groups = await done;
      const result = groups[0]?.rollouts[0] as RolloutResult;
      const attempts = await loadTrajectory(pipeline.store, result.trajectoryRef);
      const generated = attempts.flatMap((a) => a.turns.map((t) => t.policy)).filter((p: PolicyTurnRecord) => !p.restored);
      const tokensOf = (p: PolicyTurnRecord): number => (p.turnTokens && 'completionIds' in p.turnTokens ? p.turnTokens.completionIds.length : (p.usage?.completion_tokens ?? 0));
      const finalTurns = attempts.at(-1)?.turns ?? [];
      const tokens = generated.reduce((n, p) => n + tokensOf(p), 0);
      const finalTokens = finalTurns.reduce((n, t) => n + tokensOf(t.policy), 0);
      const resumed = result.attemptHistory.find((a) => a.resumed)?.resumed;
      runs.push({
        mode,
        seed,
        killed,
        result,
        calls: generated.length,
        callsAgain: generated.length - finalTurns.length,
        tokens,
        tokensAgain: tokens - finalTokens,
        replayPerCallMs: resumed && resumed.replayedCalls > 0 ? resumed.replayMs / resumed.replayedCalls : null,
        wallMs: Date.now() - started,
      });
      process.stderr.write(
        `${mode} seed ${seed}: ${killed ? `killed after turn ${killAfter}` : 'ended before the kill'}; ${result.outcomeClass}/${result.outcomeType} reward ${result.reward} in ${result.attempts} attempts, ${generated.length} model calls\n`,
      );
    }
  }
} finally {
  await close();
  await pipeline.stop();
  await server.stop();
  await llama.stop();
  if (process.env.BENCH_KEEP_SCRATCH) process.stderr.write(`kept ${dir}\n`);
  else rmSync(dir, { recursive: true, force: true });
}
const lines = [
  `sandbox killed after turn ${killAfter}'s command (the model then answering turn ${killAfter + 1}); Qwen2.5-Coder-0.5B q4 on llama.cpp, ${values.task}`,
  '| resume | seed | killed | outcome | attempts | turns | model calls | asked again | completion tokens | generated again | replay per restored call | wall |',
  '|:--|--:|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|',
];
for (const r of runs)
  lines.push(
    `| ${r.mode} | ${r.seed} | ${r.killed ? 'yes' : 'no (ended first)'} | ${r.result.outcomeClass}/${r.result.outcomeType} | ${r.result.attempts} | ${r.result.turns} | ${r.calls} | ${r.callsAgain} | ${r.tokens} | ${r.tokensAgain} | ${r.replayPerCallMs === null ? '-' : `${r.replayPerCallMs.toFixed(0)} ms`} | ${(r.wallMs / 1000).toFixed(1)} s |`,
  );
process.stdout.write(`${lines.join('\n')}\n`);
