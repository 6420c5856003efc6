/**
 * One GRPO step by the Python trainer (python/trainer, rollout_trainer.grpo) on an exported batch,
 * run in the trainer's venv (ROLLOUT_TRAIN_PYTHON from `bash scripts/setup.sh train`), and what it
 * reports. The trainer's state after the step (LoRA, optimizer, the GGUF adapter for the server, its
 * own log probabilities of every generated token) is in `out`; the next step resumes from it.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** rollout_trainer.mismatch's measure: the trainer's logprobs of the generated tokens against the server's. */
export interface TrainInferenceMismatch {
  samples: number;
  tokens: number;
  mean_k3_kl: number;
  mean_abs_delta: number;
  max_abs_delta: number;
  mean_delta: number;
}

export interface TrainerStepReport {
  step: number;
  mismatch: TrainInferenceMismatch;
  mismatch_also_at: (TrainInferenceMismatch & { temperature: number })[];
  loss: number;
  tokens: number;
  lr: number;
  per_sample: { rollout_id: string; advantage: number; mean_logprob_before: number; mean_logprob_after: number; moved: number }[];
  adapter?: string;
  adapter_gguf?: { path: string; sha256: string; bytes: number; seconds: number };
}

/** The trainer's log probability of each generated token after the step (trainer_logprobs.jsonl). */
export interface TrainerLogprobs {
  rollout_id: string;
  positions: number[];
  logprobs: number[];
}

export interface TrainerStepOptions {
  /** The trainer venv's python (ROLLOUT_TRAIN_PYTHON). */
  python: string;
  /** A `rollout export` JSONL file. */
  samples: string;
  /** The GGUF the inference server runs (the base weights). */
  gguf: string;
  /** Where the trainer's state after the step goes (made by the trainer). */
  out: string;
  /** The state an earlier step wrote, to continue from. */
  resume?: string;
  lr?: number;
  /** Also write out/adapter.gguf for the server. Default true. */
  convert?: boolean;
  /** Also report the mismatch with every token rescored at these temperatures. */
  alsoAt?: number[];
  timeoutMs?: number;
  /** Aborting it kills the trainer (SIGTERM): a command stopped by Ctrl-C leaves no trainer behind. */
  signal?: AbortSignal;
}

export class TrainerStepError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TrainerStepError';
  }
}

export async function runTrainerStep(options: TrainerStepOptions): Promise<TrainerStepReport> {
  const args = ['-m', 'rollout_trainer.grpo', '--samples', options.samples, '--gguf', options.gguf, '--out', options.out];
  if (options.convert ?? true) args.push('--convert');
  if (options.resume) args.push('--resume', options.resume);
  if (options.lr !== undefined) args.push('--lr', String(options.lr));
  for (const t of options.alsoAt ?? []) args.push('--also-at', String(t));
  const child = spawn(options.python, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: options.timeoutMs ?? 1_800_000, ...(options.signal ? { signal: options.signal } : {}) });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr = (stderr + c).slice(-20_000)));
  const code = await new Promise<number | string>((resolve, reject) => {
    child.on('error', (err) => {
      if (err.name === 'AbortError') resolve('an interrupt');
      else reject(new TrainerStepError(`could not run the trainer (${options.python}): ${err.message}; bash scripts/setup.sh train prints ROLLOUT_TRAIN_PYTHON`));
    });
    child.on('close', (c, signal) => resolve(c ?? `signal ${signal}`));
  });
  if (code !== 0)
    throw new TrainerStepError(
      `rollout_trainer.grpo on ${options.samples} ended with ${typeof code === 'number' ? `exit ${code}` : code}:\n${stderr.trim().split('\n').slice(-12).join('\n')}`,
    );
  const last = stdout.trim().split('\n').at(-1) ?? '';
  try {
    return JSON.parse(last) as TrainerStepReport;
  } catch {
    throw new TrainerStepError(`rollout_trainer.grpo printed no report line (last stdout line: ${last.slice(0, 200)})`);
  }
}

export function readTrainerLogprobs(out: string): TrainerLogprobs[] {
  return readFileSync(join(out, 'trainer_logprobs.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as TrainerLogprobs);
}
