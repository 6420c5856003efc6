/** Settings the `rollout` commands share: where Temporal is, where data goes, which tasks. */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { openTrajectoryStore } from '../../stores/openTrajectoryStore.js';
import type { TrajectoryStore } from '../../stores/trajectoryStore.js';
import { TokenModeSchema } from '../../shared/tokens.js';
import { HARNESS_NAMES, ScriptedPolicySchema, type PolicyConfig } from '../../shared/pipeline.js';
import type { ToolCallParserName } from '../../shared/tools.js';
import { UsageError } from './usageError.js';

/** The task queues a `--queue-prefix P` names: P for workflows, P-policy for policy calls; the defaults without one. */
/** An option's whole number >= 1, or `fallback` when absent; anything else is a UsageError naming the option. */
export function positiveInt(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer, got ${JSON.stringify(value)}`);
  return n;
}

export function taskQueuesFor(prefix: string | undefined): { main: string; policy: string } | undefined {
  if (prefix === undefined) return undefined;
  if (!/^[A-Za-z0-9._-]+$/.test(prefix)) throw new UsageError(`--queue-prefix ${JSON.stringify(prefix)}: use letters, digits, '.', '_' and '-'`);
  return { main: prefix, policy: `${prefix}-policy` };
}

export function dataDir(flag: string | undefined): string {
  return resolve(flag ?? process.env.ROLLOUT_DATA_DIR ?? '.rollout');
}

/** The trajectory store the flags name: --trajectories DIR, else --store (or ROLLOUT_STORE), under --data-dir. */
export function openStoreFromFlags(values: { trajectories?: string | undefined; store?: string | undefined; 'data-dir'?: string | undefined }): Promise<TrajectoryStore> {
  return openTrajectoryStore(values.trajectories !== undefined ? `fs:${values.trajectories}` : (values.store ?? process.env.ROLLOUT_STORE), dataDir(values['data-dir']));
}

/** A task directory (has task.toml) is one task; any other directory contributes its task subdirectories. */
export function expandTaskDirs(args: string[]): string[] {
  const out: string[] = [];
  for (const arg of args) {
    const dir = resolve(arg);
    if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new UsageError(`--tasks ${arg}: not a directory`);
    if (existsSync(join(dir, 'task.toml'))) {
      out.push(dir);
      continue;
    }
    const children = readdirSync(dir)
      .sort()
      .map((name) => join(dir, name))
      .filter((d) => existsSync(join(d, 'task.toml')));
    if (children.length === 0) throw new UsageError(`--tasks ${arg}: neither a task directory (no task.toml) nor a directory of tasks`);
    out.push(...children);
  }
  return out;
}

const SCRIPTS = ScriptedPolicySchema.shape.script.options;
type Script = (typeof SCRIPTS)[number];

/** `scripted:<script>` or `openai` (with --base-url and --model). */
export function parsePolicy(
  value: string,
  options: {
    baseUrl?: string;
    model?: string;
    temperature?: string;
    seed?: string;
    apiKeyEnv?: string;
    maxTokens?: string;
    requestTimeoutMs?: string;
    toolCallParser?: string;
    tokenMode?: string;
    chatTemplate?: string;
    harnessSettings?: string;
  },
): PolicyConfig {
  if (value.startsWith('harness:')) {
    // The harness's model calls go to the inference server the openai flags name, through the capture endpoint.
    if (!options.baseUrl || !options.model)
      throw new UsageError(`--policy ${value} needs --base-url and --model: the inference server its model calls are forwarded to`);
    const inference = parsePolicy('openai', { ...options, harnessSettings: undefined });
    if (inference.kind !== 'openai') throw new UsageError(`--policy ${value}: the inference server is an openai policy`);
    return {
      kind: 'harness',
      harness: value.slice('harness:'.length),
      inference,
      ...(options.harnessSettings !== undefined ? { settings: readHarnessSettings(options.harnessSettings) } : {}),
    };
  }
  if (options.harnessSettings !== undefined) throw new UsageError(`--harness-settings is for --policy harness:NAME (got --policy ${value})`);
  if (value.startsWith('scripted:')) {
    const script = value.slice('scripted:'.length);
    if (!SCRIPTS.includes(script as Script))
      throw new UsageError(`--policy ${value}: scripted policies are ${SCRIPTS.slice(0, -1).join(', ')} and ${SCRIPTS.at(-1)}`);
    return { kind: 'scripted', script: script as Script };
  }
  if (value === 'openai') {
    if (!options.baseUrl || !options.model) throw new UsageError('--policy openai needs --base-url (e.g. http://127.0.0.1:8000/v1) and --model');
    const number = (name: string, v: string | undefined): number | undefined => {
      if (v === undefined) return undefined;
      const n = Number(v);
      if (!Number.isFinite(n)) throw new UsageError(`--${name} must be a number, got ${JSON.stringify(v)}`);
      return n;
    };
    const temperature = number('temperature', options.temperature);
    const seed = number('seed', options.seed);
    const maxTokens = number('max-tokens', options.maxTokens);
    const requestTimeoutMs = number('request-timeout-ms', options.requestTimeoutMs);
    // Checked against the parser names by the batch schema, which names the ones that exist.
    const parsers = options.toolCallParser?.split(',').map((p) => p.trim()) as ToolCallParserName[] | undefined;
    const modes = TokenModeSchema.options;
    if (options.tokenMode !== undefined && !(modes as readonly string[]).includes(options.tokenMode)) {
      throw new UsageError(
        `--token-mode ${JSON.stringify(options.tokenMode)}: use ${modes.join(', ')} (server asks the server for ids, pipeline renders and sends token ids itself, off asks for none)`,
      );
    }
    const tokenMode = options.tokenMode as (typeof modes)[number] | undefined;
    if (options.chatTemplate !== undefined && tokenMode !== 'pipeline')
      throw new UsageError(
        `--chat-template ${options.chatTemplate} is what the pipeline renders prompts with: add --token-mode pipeline (in server mode the server renders with its own template)`,
      );
    return {
      kind: 'openai',
      baseUrl: options.baseUrl,
      model: options.model,
      ...(options.apiKeyEnv ? { apiKeyEnv: options.apiKeyEnv } : {}),
      sampling: {
        ...(temperature !== undefined ? { temperature } : {}),
        ...(seed !== undefined ? { seed } : {}),
        ...(maxTokens !== undefined ? { max_tokens: maxTokens } : {}),
      },
      ...(requestTimeoutMs !== undefined ? { requestTimeoutMs } : {}),
      ...(parsers ? { toolCallParser: parsers } : {}),
      ...(tokenMode ? { tokens: { mode: tokenMode, ...(options.chatTemplate !== undefined ? { chatTemplate: options.chatTemplate } : {}) } } : {}),
    };
  }
  throw new UsageError(
    `--policy ${JSON.stringify(value)}: use ${SCRIPTS.map((name) => `scripted:${name}`).join(', ')}, openai, or harness:NAME (${HARNESS_NAMES.join(', ')})`,
  );
}

/** --harness-settings FILE: the harness's own settings as a JSON object. */
function readHarnessSettings(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--harness-settings ${file}: cannot read it (${(err as Error).message})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--harness-settings ${file} is not JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new UsageError(`--harness-settings ${file} must hold a JSON object (the harness's own settings, e.g. {"agent": {"step_limit": 20}})`);
  return parsed as Record<string, unknown>;
}
