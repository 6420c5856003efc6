/**
 * `npm run demo:model`: the sample tasks with a real model. Starts llama.cpp
 * (xllamacpp) serving Qwen2.5-Coder-0.5B-Instruct on 127.0.0.1, then runs
 * `rollout run --embedded` against it with the openai policy, and prints the
 * per-task table (rewards, outcomes). It uses what docs/exact-tokens.md
 * recommends for llama.cpp: token mode `pipeline` with the server's chat
 * template rendered by the pipeline (`--chat-template`, its sha256 recorded on
 * every turn), so every rollout keeps the exact-prefix rule and can be
 * exported for training. Extra arguments go to `rollout run`
 * (e.g. `npm run demo:model -- --group-size 4 --tasks examples/tasks/fix-median`).
 * Needs the runtime and model of scripts/ensure-model.sh (ROLLOUT_LLAMA_PYTHON,
 * ROLLOUT_MODEL_GGUF); nothing is downloaded here.
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { llamaSetupFromEnv, startLlamaServer } from '../../servers/inference/llamaServer.js';
import { runCommand } from '../cli/runCommand.js';
import { UsageError } from '../cli/usageError.js';
import { DEMO_MODEL_NAME, DEMO_TOOL_CALL_PARSERS } from './modelDemoSettings.js';


const setup = llamaSetupFromEnv();
if ('missing' in setup) {
  process.stderr.write(`demo:model: ${setup.missing}\n`);
  process.exit(2);
}
const data = resolve(process.env.ROLLOUT_DATA_DIR ?? '.rollout');
mkdirSync(data, { recursive: true });
// Four slots of 4,096 tokens: the rollouts in flight here never wait for a slot, so a call's time is its own generation.
const llama = await startLlamaServer({ ...setup, parallel: 4, ctx: 16384, threads: 1, logFile: join(data, 'llama-server.log') });
process.stderr.write(
  `llama.cpp server at ${llama.baseUrl} (pid ${llama.pid}), ready in ${(llama.readyMs / 1000).toFixed(1)} s; model ${llama.model}; ` +
    `chat template ${llama.template.source} sha256 ${llama.template.sha256.slice(0, 16)} (${llama.template.file}); log ${llama.logFile}\n`,
);
const userArgs = process.argv.slice(2);
let code = 1;
try {
  code = await runCommand([
    '--embedded',
    // --tasks adds up; the user's replace the sample set.
    ...(userArgs.some((a) => a === '--tasks' || a.startsWith('--tasks=')) ? [] : ['--tasks', 'examples/tasks']),
    '--group-size', '2',
    '--max-turns', '8',
    '--policy', 'openai',
    '--base-url', llama.baseUrl,
    '--model', DEMO_MODEL_NAME,
    '--seed', '1',
    '--temperature', '0.7',
    '--max-tokens', '384',
    // Twelve rollouts share four slots on one CPU thread: a call may wait minutes for a slot, which is not the model's doing.
    '--request-timeout-ms', '280000',
    '--tool-call-parser', DEMO_TOOL_CALL_PARSERS.join(','),
    '--token-mode', 'pipeline',
    '--chat-template', llama.template.file,
    ...userArgs,
  ]);
} catch (err) {
  if (!(err instanceof UsageError)) throw err;
  process.stderr.write(`demo:model: ${err.message}\n`);
  code = 2;
} finally {
  await llama.stop();
}
process.exit(code);
