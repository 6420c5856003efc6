/**
 * The workload every rollout benchmark runs: a tiny Harbor task created in a
 * temp dir, and a scripted OpenAI-compatible policy (the real wire format,
 * served over HTTP by this process) that makes 5 turns of cheap bash tool
 * calls, `echo turn N >> /app/log`, submitting with the last one. The
 * verifier counts the lines, so verify really runs (the reward is 1 when all
 * 5 commands ran). The per-request delay stands in for an inference server.
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PolicyConfig } from '../shared/pipeline.js';
import { startScriptedOpenAIServer, type Script, type ScriptedOpenAIServer } from '../test/helpers/scriptedOpenAIServer.js';

export const TURNS = 5;
export const BENCH_MODEL = 'bench-scripted';

/** Writes `count` copies of the task (`bench-echo-000`, ...; a batch holds each task once) under `root`. */
export function createBenchTasks(root: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => createBenchTask(root, `bench-echo-${String(i).padStart(3, '0')}`));
}

/** Writes the task `name` under `root` and returns its directory. */
export function createBenchTask(root: string, name = 'bench-echo'): string {
  const dir = join(root, name);
  mkdirSync(join(dir, 'environment'), { recursive: true });
  mkdirSync(join(dir, 'tests'), { recursive: true });
  mkdirSync(join(dir, 'solution'), { recursive: true });
  writeFileSync(join(dir, 'environment', 'README'), 'The agent appends one line per turn to /app/log.\n');
  writeFileSync(join(dir, 'instruction.md'), `Append the line \`turn N\` to /app/log for N = 0 to ${TURNS - 1}, one command per turn, then submit.\n`);
  // A generous agent budget: under saturation a slow rollout should show up as slow, not as model/agent_timeout.
  writeFileSync(
    join(dir, 'task.toml'),
    'version = "1.0"\n\n[metadata]\ndifficulty = "trivial"\ncategory = "benchmark"\n\n[verifier]\ntimeout_sec = 120.0\n\n[agent]\ntimeout_sec = 3600.0\n\n[environment]\nnetwork_mode = "no-network"\n',
  );
  writeFileSync(
    join(dir, 'tests', 'test.sh'),
    `#!/bin/bash\nmkdir -p /logs/verifier\nif [ "$(wc -l < /app/log 2>/dev/null)" = "${TURNS}" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n`,
  );
  writeFileSync(join(dir, 'solution', 'solve.sh'), `#!/bin/bash\nfor n in $(seq 0 ${TURNS - 1}); do echo "turn $n" >> /app/log; done\n`);
  chmodSync(join(dir, 'tests', 'test.sh'), 0o755);
  chmodSync(join(dir, 'solution', 'solve.sh'), 0o755);
  return dir;
}

/** Turn N (0-based) runs `echo turn N >> /app/log`; the last turn also calls submit. */
export const benchScript: Script = (_request, turn) => {
  const bash = { name: 'bash', arguments: { command: `echo turn ${turn} >> /app/log` } };
  return turn < TURNS - 1 ? { toolCalls: [bash] } : { toolCalls: [bash, { name: 'submit', arguments: {} }] };
};

export async function startBenchPolicyServer(delayMs: number): Promise<ScriptedOpenAIServer> {
  return startScriptedOpenAIServer(benchScript, { delayMs, recordRequests: false });
}

export function benchPolicy(server: ScriptedOpenAIServer): PolicyConfig {
  return { kind: 'openai', baseUrl: server.baseUrl, model: BENCH_MODEL, sampling: { seed: 1 } };
}
