/**
 * Reads and validates a Harbor / Terminal-Bench task directory. Every problem
 * is a task/invalid_spec error that names the file, the field and the fix.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { parse as parseToml, TomlError } from 'smol-toml';
import { ClassifiedError } from '../shared/failures.js';
import { TaskTomlSchema, type LoadedTask, type TaskToml } from '../shared/task.js';
import { hashText, hashTree } from '../shared/hashTree.js';
import { resolveTaskNetwork } from './taskNetwork.js';

export function invalidTask(file: string, field: string | undefined, problem: string, fix: string): ClassifiedError<'task'> {
  return new ClassifiedError('task', 'invalid_spec', `${file}${field ? `: ${field}` : ''}: ${problem}. Fix: ${fix}`);
}

const KNOWN_KEYS: Record<string, readonly string[] | null> = {
  schema_version: null,
  version: null,
  task: null,
  metadata: null,
  verifier: ['timeout_sec', 'env', 'user', 'network_mode', 'allowed_hosts', 'environment_mode'],
  agent: ['timeout_sec', 'user', 'network_mode', 'allowed_hosts'],
  solution: ['env'],
  environment: ['docker_image', 'build_timeout_sec', 'os', 'cpus', 'memory_mb', 'storage_mb', 'memory', 'storage', 'allow_internet', 'network_mode', 'allowed_hosts', 'gpus', 'workdir'],
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
  network_mode: 'use network_mode = "public" (Harbor\'s default) or "no-network"',
  allowed_hosts: 'give a list of host names, e.g. allowed_hosts = ["pypi.org"]',
  environment_mode: 'use environment_mode = "shared" (tests run in the agent\'s sandbox) or "separate" (a fresh one with the workspace copied in)',
  user: 'give a user name, e.g. user = "root"',
  os: 'use os = "linux"',
  gpus: 'give a whole number, e.g. gpus = 0',
};

/**
 * Settings this pipeline cannot honour. A task that needs them would run
 * differently from what its author meant, so it is refused, never run anyway.
 */
function refuseUnhonourable(file: string, dir: string, config: TaskToml): void {
  const env = config.environment;
  if (env.gpus !== undefined && env.gpus > 0) {
    throw invalidTask(file, '[environment].gpus', `${env.gpus} GPUs requested; sandboxes here have no GPUs`, 'run the task where GPUs are provided, or set gpus = 0 if it does not need one');
  }
  if (env.os !== undefined && env.os.toLowerCase() !== 'linux') {
    throw invalidTask(file, '[environment].os', `os = "${env.os}"; sandboxes here are Linux`, 'use os = "linux" or run the task elsewhere');
  }
  for (const section of ['agent', 'verifier'] as const) {
    const user = config[section].user;
    if (user !== undefined && user !== 'root' && user !== '0') {
      throw invalidTask(file, `[${section}].user`, `user = "${user}"; commands in sandboxes here run as root (without capabilities)`, 'drop the setting or set user = "root"');
    }
  }
  for (const section of ['environment', 'agent', 'verifier'] as const) {
    if (config[section].network_mode === 'allowlist') {
      throw invalidTask(
        file,
        `[${section}].network_mode`,
        `"allowlist" (only ${(config[section].allowed_hosts ?? []).join(', ') || 'the allowed_hosts'}) cannot be enforced by sandboxes here, and running it with more or less network would change the task`,
        'use network_mode = "public" or "no-network", or run the task under Harbor on a provider with allowlists (e2b, modal, runloop)',
      );
    }
  }
  for (const compose of ['docker-compose.yaml', 'docker-compose.yml', 'compose.yaml', 'compose.yml']) {
    if (existsSync(join(dir, 'environment', compose))) {
      throw invalidTask(
        join(dir, 'environment', compose),
        undefined,
        'a compose file asks for sidecar services, which sandboxes here cannot run',
        'fold what the task needs into environment/Dockerfile, or run the task under Harbor with Docker Compose',
      );
    }
  }
}

/** Sentences for what is read but changes nothing (so nobody thinks it was applied). */
function readNotes(config: TaskToml): string[] {
  const notes: string[] = [];
  const network = resolveTaskNetwork(config);
  const verifier = config.verifier.network_mode;
  if (verifier !== undefined && verifier !== 'allowlist' && (verifier === 'public' ? 'public' : 'none') !== network.mode) {
    notes.push(
      `task.toml: [verifier].network_mode = "${verifier}" is not applied: the verifier shares the agent's sandbox (network ${network.mode}); what tests/test.sh downloads is provided offline`,
    );
  }
  if (config.verifier.environment_mode !== undefined) {
    notes.push(`task.toml: [verifier].environment_mode = "${config.verifier.environment_mode}" is not applied: the batch's verifyMode (in-place or clean-room) decides where tests run`);
  }
  return notes;
}

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
  const tomlFile = requireFile(dir, 'task.toml', 'add task.toml (at least: [agent] timeout_sec and [verifier] timeout_sec)');
  const { warnings: unknown, ...config } = readToml(tomlFile);
  refuseUnhonourable(tomlFile, dir, config);
  const warnings = [...unknown, ...readNotes(config)];
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
    workdir: config.environment.workdir ?? '/app',
    declaredWorkdir: config.environment.workdir,
    network: resolveTaskNetwork(config),
    verifierEnvironmentMode: config.verifier.environment_mode,
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
