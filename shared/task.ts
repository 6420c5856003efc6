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

export const TaskTomlSchema = z.object({
  version: z.string().optional(),
  metadata: z.record(z.string(), z.unknown()).default({}),
  verifier: z
    .object({
      timeout_sec: seconds.default(120),
      env: z.record(z.string(), z.string()).default({}),
    })
    .default({ timeout_sec: 120, env: {} }),
  agent: z
    .object({
      timeout_sec: seconds.default(600),
      user: z.string().optional(),
    })
    .default({ timeout_sec: 600 }),
  solution: z.object({ env: z.record(z.string(), z.string()).default({}) }).default({ env: {} }),
  environment: z
    .object({
      docker_image: z.string().min(1).optional(),
      build_timeout_sec: seconds.optional(),
      cpus: z.number().positive().optional(),
      memory_mb: z.number().int().positive().optional(),
      storage_mb: z.number().int().positive().optional(),
      memory: sizeString.optional(),
      storage: sizeString.optional(),
      allow_internet: z.boolean().default(false),
      gpus: z.number().int().nonnegative().optional(),
      /** Where the starting files appear in the sandbox (Harbor's convention is /app). */
      workdir: z.string().startsWith('/').default('/app'),
    })
    .default({ allow_internet: false, workdir: '/app' }),
});
export type TaskToml = z.infer<typeof TaskTomlSchema>;

/** A validated task, small enough to travel in workflow inputs and results (no file contents). */
export const TaskRefSchema = z.object({
  /** The directory name: the task's id within its collection. */
  id: z.string().min(1),
  /** Absolute path of the task directory on the workers' filesystem. */
  dir: z.string().startsWith('/'),
  /** sha256 over every file of the task (paths, exec bits and contents): the task version. */
  version: z.string().regex(/^[0-9a-f]{64}$/),
});
export type TaskRef = z.infer<typeof TaskRefSchema>;

/** How a caller names a task: its directory, optionally pinned to an id and version (the group pins it otherwise). */
export const TaskRequestSchema = z.object({
  dir: z.string().startsWith('/', 'an absolute path on the workers'),
  id: z.string().min(1).optional(),
  version: z.string().regex(/^[0-9a-f]{64}$/).optional(),
});
export type TaskRequest = z.infer<typeof TaskRequestSchema>;

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
  workdir: string;
  allowInternet: boolean;
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
  /** Keys of task.toml this pipeline does not know (Harbor ignores them too). */
  warnings: string[];
}
