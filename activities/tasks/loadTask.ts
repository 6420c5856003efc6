/**
 * Reads and validates a Harbor / Terminal-Bench task directory. Every problem
 * is a task/invalid_spec error that names the file, the field and the fix.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { parse as parseToml, TomlError } from 'smol-toml';
import { ClassifiedError } from '../../shared/failures.js';
import { TaskTomlSchema, type LoadedTask, type TaskToml } from '../../shared/task.js';
import { hashText, hashTree } from './hashTree.js';

export function invalidTask(file: string, field: string | undefined, problem: string, fix: string): ClassifiedError<'task'> {
  return new ClassifiedError('task', 'invalid_spec', `${file}${field ? `: ${field}` : ''}: ${problem}. Fix: ${fix}`);
}

const KNOWN_KEYS: Record<string, readonly string[] | null> = {
  version: null,
  metadata: null,
  verifier: ['timeout_sec', 'env'],
  agent: ['timeout_sec', 'user'],
  solution: ['env'],
  environment: ['docker_image', 'build_timeout_sec', 'cpus', 'memory_mb', 'storage_mb', 'memory', 'storage', 'allow_internet', 'gpus', 'workdir'],
};

const FIXES: Record<string, string> = {
  timeout_sec: 'give seconds as a positive number, e.g. timeout_sec = 120.0',
  env: 'use a table of strings, e.g. env = { NAME = "value" }',
  cpus: 'give a positive number of cores, e.g. cpus = 1',
  memory_mb: 'give whole MiB, e.g. memory_mb = 2048',
  storage_mb: 'give whole MiB, e.g. storage_mb = 10240',
  memory: 'use a size such as memory = "4G" (or memory_mb = 4096)',
  storage: 'use a size such as storage = "10G" (or storage_mb = 10240)',
  allow_internet: 'use true or false',
  workdir: 'use an absolute path, e.g. workdir = "/app"',
  docker_image: 'name an image, e.g. docker_image = "python:3.11-slim"',
};

function sizeToMb(size: string | undefined): number | undefined {
  if (size === undefined) return undefined;
  const m = /^(\d+(?:\.\d+)?)\s*([KMGT])/i.exec(size);
  if (!m) return undefined;
  const factor = { K: 1 / 1024, M: 1, G: 1024, T: 1024 * 1024 }[(m[2] as string).toUpperCase() as 'K' | 'M' | 'G' | 'T'];
  return Math.ceil(Number(m[1]) * factor);
}

function unknownKeys(raw: Record<string, unknown>): string[] {
  const warnings: string[] = [];
  for (const [key, value] of Object.entries(raw)) {
    if (!(key in KNOWN_KEYS)) {
      warnings.push(`task.toml: unknown key "${key}" is ignored`);
      continue;
    }
    const known = KNOWN_KEYS[key];
    if (known && value && typeof value === 'object' && !Array.isArray(value)) {
      for (const inner of Object.keys(value)) {
        if (!known.includes(inner)) warnings.push(`task.toml: unknown key [${key}].${inner} is ignored`);
      }
    }
  }
  return warnings;
}

function readToml(file: string): TaskToml & { warnings: string[] } {
  let raw: Record<string, unknown>;
  try {
    raw = parseToml(readFileSync(file, 'utf8'));
  } catch (err) {
    if (err instanceof TomlError) {
      throw invalidTask(file, `line ${err.line}, column ${err.column}`, `not valid TOML (${err.message.split('\n')[0]})`, 'correct the TOML syntax');
    }
    throw err;
  }
  const parsed = TaskTomlSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue?.path.map(String) ?? [];
    const field = path.length > 1 ? `[${path.slice(0, -1).join('.')}].${path.at(-1)}` : (path[0] ?? '(root)');
    const leaf = path.at(-1) ?? '';
    throw invalidTask(file, field, issue?.message ?? 'invalid', FIXES[leaf] ?? 'see the Harbor task format (task.toml reference)');
  }
  return { ...parsed.data, warnings: unknownKeys(raw) };
}

function requireFile(dir: string, rel: string, fix: string): string {
  const path = join(dir, rel);
  if (!existsSync(path) || !statSync(path).isFile()) throw invalidTask(path, undefined, 'missing', fix);
  return path;
}

export function loadTask(taskDir: string): LoadedTask {
  const dir = resolve(taskDir);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw invalidTask(dir, undefined, 'is not a task directory', 'pass a directory holding instruction.md, task.toml, tests/test.sh and environment/');
  }
  const instructionFile = requireFile(dir, 'instruction.md', 'write the task for the agent in instruction.md');
  const instruction = readFileSync(instructionFile, 'utf8');
  if (instruction.trim() === '') throw invalidTask(instructionFile, undefined, 'is empty', 'write the task for the agent in instruction.md');
  const { warnings, ...config } = readToml(requireFile(dir, 'task.toml', 'add task.toml (at least: [agent] timeout_sec and [verifier] timeout_sec)'));
  requireFile(dir, 'tests/test.sh', 'add tests/test.sh; it must write a reward to /logs/verifier/reward.txt or reward.json');
  const testsDir = join(dir, 'tests');

  const environmentDir = join(dir, 'environment');
  if (!existsSync(environmentDir) || !statSync(environmentDir).isDirectory()) {
    throw invalidTask(environmentDir, undefined, 'missing', 'create environment/ holding the starting files of the workspace (it may be empty)');
  }
  const needsContainer = existsSync(join(environmentDir, 'Dockerfile'));
  const dockerImage = config.environment.docker_image;

  const solutionPath = join(dir, 'solution', 'solve.sh');
  const knownBadDir = join(dir, 'known-bad');
  const knownBadScripts = existsSync(knownBadDir)
    ? readdirSync(knownBadDir)
        .filter((f) => f.endsWith('.sh'))
        .sort()
        .map((f) => join(knownBadDir, f))
    : [];

  return {
    id: basename(dir),
    dir,
    version: hashTree(dir),
    instruction,
    config,
    limits: {
      memoryMb: config.environment.memory_mb ?? sizeToMb(config.environment.memory),
      cpus: config.environment.cpus,
      diskMb: config.environment.storage_mb ?? sizeToMb(config.environment.storage),
    },
    agentTimeoutSec: config.agent.timeout_sec,
    verifierTimeoutSec: config.verifier.timeout_sec,
    workdir: config.environment.workdir,
    allowInternet: config.environment.allow_internet,
    verifierHash: hashTree(testsDir),
    environmentHash: needsContainer && dockerImage ? hashText(`image:${dockerImage}`) : hashTree(environmentDir),
    environmentDir,
    dockerImage,
    needsContainer,
    testsDir,
    solutionScript: existsSync(solutionPath) ? solutionPath : undefined,
    knownBadScripts,
    warnings,
  };
}
