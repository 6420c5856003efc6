/**
 * The one place that says what a test file needs from the machine when files run side by side
 * (test/run.ts): the locks it holds, whether it needs the machine alone, its weight and a first
 * estimate of its time before this machine has measured it. A file not named here is a light file
 * that waits more than it computes and shares everything.
 *
 * Locks (held alone unless under `shares`):
 *   cpu-heavy       a suite on the real model (llama.cpp on one thread, a core busy all along): never
 *                   two at once. They run one after another from the run's start: the run's critical
 *                   path (ROLLOUT_TEST_NICE can lower the other files' priority beside them)
 *   trainer         a suite that runs the trainer (torch on the CPU, the model's float32 weights):
 *                   never two at once, but beside one real-model suite. With one lock for both, the
 *                   two chains ran one after the other (1,455 s of a 1,455 s run, 2026-12-06) while the
 *                   other files were done at 1,152 s and the machine idled at one core
 *   port:7233       binds, or needs free, the default Temporal address 127.0.0.1:7233 and UI 8233
 *                   (`rollout run --embedded` takes them when free)
 *   queue:default   starts workers on the default task queues (rollout-pipeline-*)
 *   loop-sweep      shared by every file that reaps (a worker's start, the janitor, `rollout gc`: each
 *                   detaches loop devices of deleted layers machine-wide); held alone by the file that
 *                   asserts its own gc is the one that detached them
 *   podman-storage  shared by files that build or run task images; held alone by the file that diffs
 *                   podman's working containers and mounts before and after
 *   host-network    the file that snapshots the host's links, addresses, routes and iptables rules
 *   kube-node       kubelet's and containerd's host paths (/var/lib/kubelet, /run/containerd)
 *   temporal-cluster the real Temporal cluster's fixed ports (7233-7243, 6933-6939) on a random 127.x prefix
 */
import type { ScheduledFile } from './scheduler.js';
import type { FileTiming } from './timings.js';

export interface FileNeeds {
  locks?: string[];
  shares?: string[];
  alone?: boolean;
  /** Cores it keeps busy on average, until measured here. */
  weight?: number;
  /** Wall seconds, until measured here. */
  estimateS?: number;
  /** The runner stops the file past this (default: four times its expected time, within 25-45 minutes). */
  limitS?: number;
}

export interface PlannedFile extends ScheduledFile {
  limitS: number;
}

export const CPU_HEAVY = 'cpu-heavy';
export const TRAINER = 'trainer';
const HEAVY = CPU_HEAVY;
const DEFAULT_PORT = 'port:7233';
const LOOP_SWEEP = 'loop-sweep';
const PODMAN = 'podman-storage';
const CLUSTER = 'temporal-cluster';

const model = (estimateS: number, weight = 1.5): FileNeeds => ({ locks: [HEAVY], weight, estimateS });
const trainer = (estimateS: number, weight = 1.5): FileNeeds => ({ locks: [TRAINER], weight, estimateS });
const reaps = (extra: FileNeeds = {}): FileNeeds => ({ ...extra, shares: [LOOP_SWEEP, ...(extra.shares ?? [])] });

export const FILE_NEEDS: Record<string, FileNeeds> = {
  // The real model: one suite at a time; the trainer: one at a time, beside one of them. A suite with scripted cases beside its real-model
  // ones keeps those in a file of their own, which does not wait for this slot (harnessPolicy,
  // generationTooLong).
  'test/integration/realModel.test.ts': model(300),
  'test/integration/realModelTokens.test.ts': model(200),
  'test/integration/generationTooLongRealModel.test.ts': model(40),
  'test/integration/samplingLogprobs.test.ts': model(120),
  'test/integration/admissionRealServer.test.ts': model(120),
  // About 9 minutes beside others: several trainer processes (torch on the CPU, the model's float32 weights).
  'test/integration/trainInferenceMismatch.test.ts': trainer(640, 1.8),
  'test/integration/harnessRealModel.test.ts': model(170, 1.2),
  'test/unit/trainerState.test.ts': trainer(60),
  // A real node, a real cluster: mostly waiting on their own servers, with their own host resources.
  'test/integration/kubernetesRealNode.test.ts': { locks: ['kube-node'], shares: [PODMAN], weight: 1.2, estimateS: 400 },
  'test/cluster/clusterChaos.test.ts': { locks: ['host-network', CLUSTER], weight: 1.2, estimateS: 300 },
  'test/cluster/clusterBadInput.test.ts': { locks: [CLUSTER], weight: 1, estimateS: 120 },
  // Task images: a cold cache builds CPython bases from source inside these (measured weights follow).
  'test/integration/imageSandbox.test.ts': { shares: [PODMAN], weight: 1, estimateS: 550 },
  'test/integration/imageTasksPipeline.test.ts': { shares: [PODMAN], weight: 1, estimateS: 200 },
  'test/integration/buildOrphans.test.ts': { locks: [PODMAN], weight: 1, estimateS: 200 },
  'test/integration/verifierForgery.test.ts': { shares: [PODMAN], estimateS: 120 },
  'test/integration/buildIsolation.test.ts': { shares: [PODMAN], weight: 1, estimateS: 240 },
  // The default address and queues.
  'test/integration/cliOffline.test.ts': reaps({ locks: [DEFAULT_PORT], estimateS: 90 }),
  'test/integration/cli.test.ts': reaps({ locks: [DEFAULT_PORT, 'queue:default'], estimateS: 200 }),
  'test/integration/interrupt.test.ts': reaps({ locks: [DEFAULT_PORT], estimateS: 150 }),
  'test/integration/cliLaunchers.test.ts': reaps({ locks: [DEFAULT_PORT], estimateS: 100 }),
  // Loop devices of deleted layers.
  'test/integration/gcOffline.test.ts': { locks: [LOOP_SWEEP], estimateS: 60 },
  'test/integration/reaper.test.ts': reaps(),
  'test/integration/sandboxPool.test.ts': reaps(),
  'test/faults/faultSuite.test.ts': reaps({ weight: 1, estimateS: 900 }),
  'test/integration/serverOutage.test.ts': reaps({ estimateS: 150 }),
  'test/integration/workerTelemetry.test.ts': reaps(),
  'test/integration/trajectoryStores.test.ts': reaps(),
  // Bursts of CPU or memory by design.
  'test/integration/escapeSuite.test.ts': { weight: 1, estimateS: 300 },
  'test/integration/benchHarness.test.ts': { weight: 1, estimateS: 300 },
};

const DEFAULT_WEIGHT = 0.5;
const DEFAULT_ESTIMATE_S = 60;
/**
 * A file is stopped past four times its expected time, never before 25 minutes nor after 45: the same
 * machine ran the fault suite in 507 s one hour and past 1,500 s (stopped) the hour before, CPU
 * seconds inflated alike (a 2-core VM whose host is busy), and a limit that stops a slow but
 * progressing file fails the whole run. 45 minutes still leaves a hung file's run inside CI's 90.
 */
const MIN_LIMIT_S = 25 * 60;
const MAX_LIMIT_S = 45 * 60;
const SLOWDOWN_ALLOWED = 4;

export function scheduledFile(file: string, measured: FileTiming | undefined): PlannedFile {
  const needs = FILE_NEEDS[file] ?? {};
  const expectedS = measured?.wallS ?? needs.estimateS ?? DEFAULT_ESTIMATE_S;
  // A measured weight is CPU / wall of the last run; floored so a file that mostly slept still counts.
  const weight = measured && measured.wallS > 0 ? Math.max(0.15, measured.cpuS / measured.wallS) : (needs.weight ?? DEFAULT_WEIGHT);
  return {
    file,
    expectedS,
    weight,
    locks: needs.locks ?? [],
    shares: needs.shares ?? [],
    alone: needs.alone ?? false,
    limitS: needs.limitS ?? Math.min(MAX_LIMIT_S, Math.max(MIN_LIMIT_S, SLOWDOWN_ALLOWED * expectedS)),
  };
}

