/**
 * The sandbox provider interface every provider implements (local namespaces,
 * Kubernetes pods) and the conformance suite checks. Handles are plain JSON so
 * any process on a host that can reach the sandbox can re-attach to it.
 */
import { z } from 'zod';

export const SandboxLimitsSchema = z
  .object({
    /** Memory ceiling for every process of the sandbox together, in MiB. */
    memoryMb: z.number().int().positive().optional(),
    /** Most processes (and threads) alive at once. */
    pids: z.number().int().positive().optional(),
    /** CPU quota in cores (0.5 = half a core). */
    cpus: z.number().positive().optional(),
    /** Size of the writable layer over the task's files (and /tmp), in MiB. */
    diskMb: z.number().int().positive().optional(),
  })
  .strict();
export type SandboxLimits = z.infer<typeof SandboxLimitsSchema>;

export const SandboxOwnerSchema = z
  .object({
    workflowId: z.string().min(1),
    runId: z.string(),
    attempt: z.number().int().nonnegative(),
  })
  .strict();
export type SandboxOwner = z.infer<typeof SandboxOwnerSchema>;

export const SandboxSpecSchema = z
  .object({
    /** Host directory with the task's starting files: the read-only lower layer at `workdir`. */
    environmentDir: z.string().min(1),
    /** Container image for providers that run containers (Harbor's [environment].docker_image); the local provider ignores it. */
    image: z.string().min(1).optional(),
    /**
     * Local provider: host directory holding an image's root filesystem (built by images/).
     * It becomes the read-only lower layer of the whole sandbox root (writable through the overlay, as a
     * container's), instead of the host's /usr with environmentDir at workdir.
     */
    rootfs: z.string().startsWith('/').optional(),
    /** Environment every command in the sandbox starts with (an image's ENV); an exec's own env wins. */
    env: z.record(z.string(), z.string()).default({}),
    /**
     * Capabilities commands keep (the rest are dropped), from a small set that acts only on what the
     * sandbox's own namespaces hold: an image sandbox keeps the file ones Docker gives root (files
     * COPY'd read-only are still root's to change), and setuid/setgid, which Docker gives root too (apt
     * drops to its _apt user to download); another uid in the sandbox's own pid, mount and network
     * namespaces reaches nothing more than root without capabilities does. Also from Docker's default
     * set, for services an oracle starts: sys_chroot (sshd's privilege separation chroots to
     * /run/sshd; the sandbox's root is a pivot_root, which no chroot gets above), kill (signals reach
     * only the sandbox's own pid namespace, whose init the kernel shields) and net_bind_service (ports
     * below 1024 of the sandbox's own network namespace). Default: none.
     */
    fileCapabilities: z.array(z.enum(['chown', 'dac_override', 'fowner', 'fsetid', 'setuid', 'setgid', 'sys_chroot', 'kill', 'net_bind_service'])).default([]),
    /** Host directories bound read-only into the sandbox (the verifier's offline tools). */
    readOnlyMounts: z.array(z.object({ source: z.string().startsWith('/'), target: z.string().startsWith('/') }).strict()).default([]),
    /** Where the starting files appear inside the sandbox (Harbor: /app). */
    workdir: z.string().startsWith('/').default('/app'),
    limits: SandboxLimitsSchema.default({}),
    /**
     * `none`: only the sandbox's own loopback. `public` (Harbor's network_mode = "public"): the outside
     * (the package registries), through user-mode networking; never the host's own ports, its private
     * networks or another sandbox. `host`: the host's network itself, explicitly opted into (tests).
     */
    network: z.enum(['none', 'public', 'host']).default('none'),
    owner: SandboxOwnerSchema,
    /** Free-form labels the reaper selects on (batch, task, ...). */
    labels: z.record(z.string(), z.string()).default({}),
    /** How long the sandbox is presumed wanted without a renewal; the reaper removes it after. */
    leaseMs: z.number().int().positive().default(60 * 60 * 1000),
  })
  .strict();
export type SandboxSpec = z.input<typeof SandboxSpecSchema>;
export type ResolvedSandboxSpec = z.output<typeof SandboxSpecSchema>;

/** How each limit is actually enforced on this host, as `provision` reports it. */
export type LimitEnforcement = 'cgroup-v2' | 'cgroup-v1' | 'rlimit' | 'tmpfs-size' | 'ext4-file-size' | 'pod-limits' | 'not-requested' | 'not-enforced';
export interface EnforcedLimits {
  memory: LimitEnforcement;
  pids: LimitEnforcement;
  cpu: LimitEnforcement;
  disk: LimitEnforcement;
}

export const LocalSandboxHandleSchema = z
  .object({
    provider: z.literal('local'),
    id: z.string().regex(/^[a-z0-9-]+$/),
    /** Hostname of the machine that holds the sandbox; only processes there can reach it. */
    host: z.string(),
    /** Host pid of the sandbox's init (pid 1 inside), and its start time to detect pid reuse. */
    pid: z.number().int().positive(),
    pidStartTime: z.string(),
    workdir: z.string(),
    stateDir: z.string(),
    cgroupProcFiles: z.array(z.string()),
    /** Address-space rlimit every process gets where no memory cgroup is available. */
    memoryRlimitBytes: z.number().int().positive().nullable(),
    /** The spec's env (an image's ENV), applied to every command. */
    env: z.record(z.string(), z.string()).optional(),
    /** The spec's fileCapabilities, kept by every command. */
    capabilities: z.array(z.string().regex(/^[a-z_]+$/)).optional(),
    /** The exec server's socket on the host, when the sandbox's init is the compiled helper's (sandboxes/local/helper/sandbox-init.c). */
    execSocket: z.string().startsWith('/').optional(),
  })
  .strict();
export type LocalSandboxHandle = z.infer<typeof LocalSandboxHandleSchema>;

export const KubernetesSandboxHandleSchema = z
  .object({
    provider: z.literal('kubernetes'),
    /** The pod name. */
    id: z.string().regex(/^[a-z0-9-]+$/),
    namespace: z.string().min(1),
    container: z.string().min(1),
    /** The pod's UID: a pod recreated under the same name is not this sandbox. */
    uid: z.string().min(1),
    workdir: z.string(),
  })
  .strict();
export type KubernetesSandboxHandle = z.infer<typeof KubernetesSandboxHandleSchema>;

export const SandboxHandleSchema = z.discriminatedUnion('provider', [LocalSandboxHandleSchema, KubernetesSandboxHandleSchema]);
export type SandboxHandle = z.infer<typeof SandboxHandleSchema>;

export interface ExecOptions {
  /** Kill the command (and its process group) after this long. */
  timeoutMs?: number;
  env?: Record<string, string>;
  stdin?: string | Uint8Array;
  /** Working directory inside the sandbox; the workdir when absent. */
  cwd?: string;
  /** Per-stream cap on captured output; beyond it output is dropped and `truncated` says so. */
  maxOutputBytes?: number;
  /** Aborting kills the command's process group (the activity running it was cancelled). */
  signal?: AbortSignal;
  /**
   * Names this command across retries (e.g. `attempt-0/turn-3/call-0`). A
   * command under the same key that is still running, left by a worker that
   * died, is killed before this one starts, so a retried tool call never runs
   * twice at the same time.
   */
  key?: string;
}

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  durationMs: number;
  /** True when a stream exceeded maxOutputBytes; the text then ends with a note saying how much was dropped. */
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
}

export interface ReadFileOptions {
  /** Refuse files larger than this (bytes). */
  maxBytes?: number;
}

export interface ProvisionResult {
  handle: SandboxHandle;
  enforcedLimits: EnforcedLimits;
  /** The image the sandbox runs, as its runtime reports it (Kubernetes: the pod's imageID, by digest); absent when none is reported. */
  image?: { reference: string; digest: string };
}

export interface TeardownReport {
  sandboxId: string;
  /** False when the sandbox was already gone (teardown is idempotent). */
  existed: boolean;
  processesKilled: number;
  directoriesRemoved: string[];
  mountsRemoved: string[];
  cgroupsRemoved: string[];
}

/** What the provider's on-host registry knows of one sandbox; the reaper works from this. */
export interface SandboxRecord {
  id: string;
  provider: SandboxHandle['provider'];
  owner: SandboxOwner;
  labels: Record<string, string>;
  createdAt: string;
  leaseExpiresAt: string;
  /** Null until the sandbox is up (a record is written before launch so a crash mid-provision is still found). */
  handle: SandboxHandle | null;
  /** Whether the sandbox's init process still runs. */
  alive: boolean;
  /**
   * Whether the worker process that holds the sandbox (provisioned it, or last took it over) still
   * runs; undefined when the provider cannot tell (Kubernetes, records written before it was kept).
   */
  holderAlive?: boolean;
  /** Whether that holder is the process asking. */
  heldByThisProcess?: boolean;
}

/**
 * What the host knows of how a sandbox that is gone ended, for failure
 * attribution (verifier/attribution/). Every field is evidence the host
 * holds, never something the sandbox's processes could write.
 */
export interface SandboxLossEvidence {
  /** The provider's record of the sandbox is gone: the host tore it down (a teardown, the reaper). */
  tornDownByHost: boolean;
  /** Processes the sandbox's own memory limit killed (cgroup OOM events); null when unknown. */
  oomKills: number | null;
  /** How the sandbox's init ended: `signal` when the host killed it, `exit` with a status when it ended on its own; null when unknown. */
  initEnd: { kind: 'signal'; signal: string } | { kind: 'exit'; status: number } | null;
}

/**
 * What a sandbox's writable state is, as a digest: every file the agent can have changed (path, type,
 * permission bits, owner, content; never times). Two sandboxes with equal digests hold the same files.
 */
export interface SandboxStateDigest {
  /** sha256 over every entry but the volatile ones, sorted by path. */
  digest: string;
  /**
   * The entries that are caches, logs and bytecode (VOLATILE_PATHS): content that embeds the time it was
   * made (a log line, a .pyc's source mtime, apt's package cache). Counted apart: a difference there is
   * drift, as a time in a command's output is, not another state.
   */
  volatile?: { digest: string; files: number };
  /** A short digest per area (a path of up to three components, e.g. /app/out.txt or /usr/lib/python3): says where two states differ. */
  areas: Record<string, string>;
  /** Entries (files, directories, links, deletions) counted. */
  files: number;
  /** Bytes of file content counted. */
  bytes: number;
  /**
   * Why no digest could be taken (more entries or bytes than the reader's bounds): `digest` is then
   * 'too-large', and a replay to this state cannot be checked, so resume restarts instead.
   */
  tooLarge?: string;
}

/**
 * Paths whose content is derived and embeds the time it was made: caches, logs, Python bytecode.
 * A state digest counts them apart (SandboxStateDigest.volatile).
 */
export const VOLATILE_PATHS: readonly RegExp[] = [/(^|\/)__pycache__(\/|$)/, /\.py[co]$/, /^\/var\/cache(\/|$)/, /^\/var\/log(\/|$)/, /^\/var\/lib\/apt\/lists(\/|$)/, /^\/root\/\.cache(\/|$)/];

export function isVolatilePath(path: string): boolean {
  return VOLATILE_PATHS.some((re) => re.test(path));
}

export interface SandboxProvider {
  readonly name: string;
  provision(spec: SandboxSpec): Promise<ProvisionResult>;
  exec(handle: SandboxHandle, command: string, options?: ExecOptions): Promise<ExecResult>;
  writeFile(handle: SandboxHandle, path: string, content: string | Uint8Array): Promise<void>;
  readFile(handle: SandboxHandle, path: string, options?: ReadFileOptions): Promise<Uint8Array>;
  /**
   * Reads a file the pipeline must trust (the verifier's reward, an archive it made) without running
   * any program of the sandbox's root filesystem, which the agent may have replaced, and without
   * following a symbolic link on the path; only a regular file is read. A missing file is an error
   * whose message contains "No such file or directory". Optional: callers fall back to readFile.
   */
  readTrusted?(handle: SandboxHandle, path: string, options?: ReadFileOptions): Promise<Uint8Array>;
  /**
   * What the agent replaced, removed or planted among the programs, libraries and startup hooks of the
   * sandbox's image that an in-place verifier would load (shared/integrityRules.ts), one
   * line per finding; empty when nothing. Read without running anything in the sandbox. Optional: a
   * provider without it verifies in place unchecked (docs/verifier-integrity.md).
   */
  tamperEvidence?(handle: SandboxHandle): Promise<string[]>;
  /** How many processes the agent left running in the sandbox (its init aside). Optional. */
  lingeringProcesses?(handle: SandboxHandle): Promise<number>;
  teardown(handleOrId: SandboxHandle | string): Promise<TeardownReport>;
  list(labels?: Record<string, string>): Promise<SandboxRecord[]>;
  /**
   * How many sandboxes this provider's registry holds, without reading each
   * record (the sandboxes-alive gauge asks on every provision and teardown).
   * Optional: callers fall back to list().length.
   */
  count?(): Promise<number>;
  renewLease(handle: SandboxHandle, leaseMs: number): Promise<void>;
  /**
   * A sandbox beside a live one, for its verifier (Harbor runs the tests beside the agent's live
   * processes: a server the tests call must still answer). It sees the first one's root filesystem as
   * it is (writes of either side are seen by the other) and shares its network (its services answer on
   * its loopback), but has processes, /tests, /logs, /tmp and /root of its own that the first one's
   * processes cannot see, and limits of its own. Tearing the first one down takes it along. Optional:
   * the in-place verifier then stops the agent's processes and runs the tests in the agent's sandbox.
   */
  provisionBeside?(handle: SandboxHandle, options?: { labels?: Record<string, string> }): Promise<ProvisionResult>;
  /**
   * Kills every process of the sandbox but its own init, from outside, so it
   * works even when the sandbox cannot start one more process (a fork bomb
   * left running). Returns how many were killed. Optional: the verifier falls
   * back to killing from inside.
   */
  stopProcesses?(handle: SandboxHandle): Promise<number>;
  /** How a sandbox found gone ended (see SandboxLossEvidence). Optional: attribution then has no evidence and keeps infra. */
  lossEvidence?(handle: SandboxHandle): Promise<SandboxLossEvidence>;
  /**
   * Takes a `public` sandbox's network away for the rest of its life (only its loopback stays): what
   * `rollout task check` does to see whether a verifier needs the outside world to score. Optional:
   * the check then says it could not tell.
   */
  disconnectNetwork?(handle: SandboxHandle): Promise<void>;
  /**
   * The digest of the sandbox's writable state (SandboxStateDigest), read without running anything in
   * it. Optional: resume then checks a replayed turn by its exit codes alone, and says so.
   */
  stateDigest?(handle: SandboxHandle): Promise<SandboxStateDigest>;
  /**
   * Releases what sandboxes removed without a teardown left on this host, which no record names any
   * more (the local provider: loop devices of deleted layer files). Returns a line for each thing
   * released. Optional: the reaper then only reaps by the records.
   */
  sweepStrays?(): Promise<string[]>;
  /**
   * Releases what the provider keeps for later (the local provider's pool of ready sandboxes): called
   * once at worker shutdown, after the last activity. Optional: nothing to release.
   */
  close?(): Promise<void>;
}

/**
 * Label of a sandbox a provider's pool holds ready for a rollout that has not asked yet. Its owner is
 * the pool, not a workflow: the reaper keeps it while its holder process lives and removes it once
 * that process is gone.
 */
export const SANDBOX_POOL_LABEL = 'rollout.pool';

/** The handle as a local one; throws for a handle of another provider (host-side tools that read pids and paths). */
export function localHandle(handle: SandboxHandle): LocalSandboxHandle {
  if (handle.provider !== 'local') throw new Error(`sandbox ${handle.id} is a ${handle.provider} sandbox, not a local one`);
  return handle;
}
