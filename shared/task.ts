/**
 * Tasks in the Harbor / Terminal-Bench format, as the pipeline sees them.
 *
 * A task directory holds `instruction.md`, `task.toml`, `tests/test.sh`
 * (writes /logs/verifier/reward.txt or reward.json), `solution/solve.sh`, and
 * `environment/` (the starting files; a Dockerfile means a container provider
 * is needed). Our one addition: `known-bad/*.sh`, solutions that must score 0,
 * which `rollout task check` runs.
 */
import { z } from 'zod';

const seconds = z.number().positive();
/** Harbor's older spellings: memory = "4G", storage = "10G". */
const sizeString = z.string().regex(/^\d+(\.\d+)?\s*[KMGT]i?B?$/i, 'a size such as "512M" or "4G"');

/**
 * Harbor's network_mode: "public" (its default), "no-network", or "allowlist" (with allowed_hosts, which
 * sandboxes here cannot enforce: refused when loaded); "none" is this project's older spelling of no-network.
 */
const networkMode = z.enum(['public', 'no-network', 'none', 'allowlist']);

/**
 * task.toml in both of Harbor's forms: the current one (`schema_version`, `[task]`,
 * `[verifier] user network_mode environment_mode`, `[agent] user network_mode`,
 * `[environment] os gpus network_mode ...`) and the legacy one Terminal-Bench 2.0 uses
 * (`version = "1.0"`, `memory = "2G"`, `storage = "10G"`, `allow_internet`).
 */
export const TaskTomlSchema = z.object({
  schema_version: z.string().optional(),
  version: z.string().optional(),
  /** Harbor's [task] table (name, description, ...): informational, kept as it is. */
  task: z.record(z.string(), z.unknown()).default({}),
  metadata: z.record(z.string(), z.unknown()).default({}),
  verifier: z
    .object({
      timeout_sec: seconds.default(120),
      env: z.record(z.string(), z.string()).default({}),
      user: z.string().optional(),
      network_mode: networkMode.optional(),
      allowed_hosts: z.array(z.string()).optional(),
      environment_mode: z.enum(['shared', 'separate']).optional(),
    })
    .default({ timeout_sec: 120, env: {} }),
  agent: z
    .object({
      timeout_sec: seconds.default(600),
      user: z.string().optional(),
      network_mode: networkMode.optional(),
      allowed_hosts: z.array(z.string()).optional(),
    })
    .default({ timeout_sec: 600 }),
  solution: z.object({ env: z.record(z.string(), z.string()).default({}) }).default({ env: {} }),
  environment: z
    .object({
      docker_image: z.string().min(1).optional(),
      build_timeout_sec: seconds.optional(),
      os: z.string().optional(),
      cpus: z.number().positive().optional(),
      memory_mb: z.number().int().positive().optional(),
      storage_mb: z.number().int().positive().optional(),
      memory: sizeString.optional(),
      storage: sizeString.optional(),
      /** Harbor's legacy switch; unset means what network_mode says, and with neither, Harbor's default (public). */
      allow_internet: z.boolean().optional(),
      network_mode: networkMode.optional(),
      allowed_hosts: z.array(z.string()).optional(),
      gpus: z.number().int().nonnegative().optional(),
      /** Where the starting files appear in the sandbox (Harbor's convention is /app; an image's WORKDIR when unset). */
      workdir: z.string().startsWith('/').optional(),
    })
    .default({}),
});
export type TaskToml = z.infer<typeof TaskTomlSchema>;

/**
 * A task's id (its directory's name): it names the group's and rollouts' workflows and is matched in
 * visibility queries (RolloutTaskId="..."), so it keeps to characters those take as they are.
 */
export const TaskIdSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}$/,
    "a task id (the task directory's name) is letters, digits, dot, dash, underscore and plus, starting with a letter or digit, at most 200: rename the task directory",
  );

/** A validated task, small enough to travel in workflow inputs and results (no file contents). */
export const TaskRefSchema = z.object({
  /** The directory name: the task's id within its collection. */
  id: TaskIdSchema,
  /** Absolute path of the task directory on the workers' filesystem. */
  dir: z.string().startsWith('/'),
  /** sha256 over every file of the task (paths, exec bits and contents): the task version. */
  version: z.string().regex(/^[0-9a-f]{64}$/),
});
export type TaskRef = z.infer<typeof TaskRefSchema>;

/** How a caller names a task: its directory, optionally pinned to an id and version (the group pins it otherwise). */
export const TaskRequestSchema = z.object({
  dir: z.string().startsWith('/', 'an absolute path on the workers'),
  id: TaskIdSchema.optional(),
  version: z.string().regex(/^[0-9a-f]{64}$/).optional(),
});
export type TaskRequest = z.infer<typeof TaskRequestSchema>;

/** The two network modes sandboxes here give: `none` (own loopback only) and `public` (the internet, private ranges closed). */
export type NetworkMode = 'none' | 'public';

export interface TaskNetwork {
  mode: NetworkMode;
  /** The setting it came from: a task.toml key, Harbor's default, or an override (`rollout run --network public`). */
  source: string;
  /** When overridden: what the task itself would have had. */
  task?: { mode: NetworkMode; source: string };
}

export interface TaskLimits {
  memoryMb: number | undefined;
  cpus: number | undefined;
  diskMb: number | undefined;
}

export interface LoadedTask extends TaskRef {
  instruction: string;
  config: TaskToml;
  limits: TaskLimits;
  agentTimeoutSec: number;
  verifierTimeoutSec: number;
  /** [environment] workdir, else /app (an image-based sandbox uses the image's WORKDIR when the task sets none). */
  workdir: string;
  /** [environment] workdir as the task wrote it. */
  declaredWorkdir: string | undefined;
  /** What the agent's sandbox may reach (the verifier shares it), and which setting said so (tasks/taskNetwork.ts). */
  network: TaskNetwork;
  /** Harbor's [verifier] environment_mode: shared (in the agent's sandbox) or separate (a fresh one). */
  verifierEnvironmentMode: 'shared' | 'separate' | undefined;
  /** sha256 over tests/: what the verifier runs. */
  verifierHash: string;
  /** sha256 over environment/ (or the image name, for image-only tasks). */
  environmentHash: string;
  environmentDir: string;
  dockerImage: string | undefined;
  /** True when environment/ has a Dockerfile: only a container provider can build it. */
  needsContainer: boolean;
  testsDir: string;
  solutionScript: string | undefined;
  knownBadScripts: string[];
  /** Keys of task.toml this pipeline does not know, and settings it reads differently: each a sentence. */
  warnings: string[];
}
