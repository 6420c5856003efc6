/**
 * The real inference server for tests: llama.cpp (xllamacpp) serving the
 * Qwen2.5-Coder-0.5B GGUF that scripts/ensure-model.sh installs. Tests that
 * need it pass `{ skip: skipWithoutModel }`: without ROLLOUT_MODEL_GGUF they
 * are skipped with a message naming the script to run.
 */
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { llamaSetupFromEnv, startLlamaServer, type LlamaServerOptions, type RunningLlamaServer } from '../../servers/inference/llamaServer.js';

const setup = llamaSetupFromEnv();
const outputDir = join(resolve(dirname(fileURLToPath(import.meta.url)), '../..'), 'test-output');

/** false when the model is installed, else the reason the test is skipped (for node:test's `skip`). */
export const skipWithoutModel: string | false = 'missing' in setup ? `needs the real model: ${setup.missing}` : false;

/** The model name the tests send (llama.cpp serves one model whatever the name; it echoes the file path). */
export const TEST_MODEL_NAME = 'qwen2.5-coder-0.5b-instruct-q4_k_m';

export async function startTestLlamaServer(options: Partial<Omit<LlamaServerOptions, 'python' | 'model'>> & { name: string }): Promise<RunningLlamaServer> {
  return startLlamaServer(testLlamaOptions(options));
}

/** The options startTestLlamaServer starts a server with: what a restart (a weight sync) starts it with again. */
export function testLlamaOptions(options: Partial<Omit<LlamaServerOptions, 'python' | 'model'>> & { name: string }): LlamaServerOptions {
  if ('missing' in setup) throw new Error(setup.missing);
  mkdirSync(outputDir, { recursive: true });
  const { name, ...rest } = options;
  return { ...setup, logFile: join(outputDir, `llama-server-${name}-${process.pid}.log`), ...rest };
}
