/** What one measured batch (bench/pipelineRun.ts) is given, and everything it measured. */
import type { PolicyConfig } from '../shared/pipeline.js';
import type { Summary } from '../shared/stats.js';
import type { Leaks } from '../test/faults/faultKit.js';
import type { ScriptedOpenAIServer } from '../test/helpers/scriptedOpenAIServer.js';
import type { BenchWorkerReport, WorkerSetup } from './benchWorker.js';
import type { Placement } from './context.js';
import type { RolloutBreakdown } from './historyBreakdown.js';

export interface PipelineRunSpec {
  label: string;
  groups: number;
  groupSize: number;
  setup: WorkerSetup;
  db: 'memory' | 'file';
  /** Run one rollout first, unmeasured (V8 contexts, connections, page cache), as the bare loop does. */
  warmup?: boolean;
  /**
   * Stop measuring after this long: count the rollouts finished by then,
   * cancel the rest (their teardown still runs) and report the rate and a
   * projected completion instead of a full run.
   */
  deadlineMs?: number;
}

export interface PipelineEnv {
  scratch: string;
  /** One task directory per group (a batch holds each task once). */
  taskDirs: string[];
  bundleFile: string;
  policy: PolicyConfig;
  /** The policy's HTTP server, to read how many requests were open at once. */
  policyServer?: ScriptedOpenAIServer;
  /** group.policyCalls and group.attemptOn of every batch (the defaults when absent). */
  placement?: Placement;
}

export interface QueueBacklog {
  /** Most tasks waiting in the queue at one sample. */
  peak: number;
  /** Oldest waiting task at one sample, ms. */
  peakAgeMs: number;
}

export interface SandboxMemorySample {
  alive: number;
  sampled: number;
  processesPerSandbox: number;
  pssKbPerSandbox: number;
  /** The bwrap process outside the sandbox that waits for its init. */
  launcherPssKbPerSandbox: number;
}

export type WorkerProcessReport = Omit<BenchWorkerReport, 'type' | 'sandboxIds'> & { cpuMs: number; sandboxCpuMs: number };

export interface PipelineRunResult {
  label: string;
  db: 'memory' | 'file';
  setup: WorkerSetup;
  groups: number;
  groupSize: number;
  rollouts: number;
  /** False when the deadline came first; wallMs is then the deadline. */
  finished: boolean;
  /** Rollouts closed by the end of the measurement. */
  completed: number;
  /** wallMs × rollouts / completed when the deadline came first (NaN when none finished). */
  projectedWallMs: number;
  wallMs: number;
  /** Rollouts finished per second of the measured window. */
  rolloutsPerSecond: number;
  /** Rollout workflow start to close. */
  e2e: Summary;
  stages: { queue: Summary; provision: Summary; agent: Summary; verify: Summary; teardown: Summary };
  ok: number;
  errors: number;
  errorTypes: Record<string, number>;
  leaks: number;
  leakDetail: Leaks;
  cpuMs: { worker: number; sandboxes: number; server: number; bench: number; total: number };
  cpuMsPerRollout: number;
  /** Total CPU over (wall × cores): 1.0 means every core was busy the whole run. */
  cpuUtilization: number;
  /** How busy the whole machine was (ours and everyone else's), from /proc/stat. */
  machineBusy: number;
  /** Sum over the worker processes of their peak RSS. */
  workerPeakRssKb: number;
  serverPeakRssKb: number;
  /** Drop of the host's MemAvailable from the start to its lowest during the run. */
  hostMemoryDropKb: number;
  peakSandboxesAlive: number;
  sandboxMemory: SandboxMemorySample | null;
  workers: WorkerProcessReport[];
  /** Peaks and share of samples at the slot limit, by kind of work, over all worker processes. */
  peaks: BenchWorkerReport['peaks'];
  atSlotLimit: BenchWorkerReport['atSlotLimit'];
  /** Worst p99 event loop delay of the worker processes. */
  eventLoopP99Ms: number;
  backlog: Record<'workflow' | 'provision' | 'host' | 'policy', QueueBacklog>;
  /** Mean schedule-to-start (ms) per task kind, from the SDK's metrics. */
  scheduleToStartMs: Record<string, number>;
  policyPeakInFlight: number;
  /** From the histories of a sample of rollouts: waits and runs of activities and workflow tasks. */
  breakdown: RolloutBreakdown | null;
}
