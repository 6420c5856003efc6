import type { WorkerSetup } from './benchWorker.js';

/**
 * Worker settings the benchmark compares, each a run of its own. `before`
 * spells out the defaults createPipelineWorkers had before issue 7, in one
 * process, sandbox commands spawned by the worker itself; `defaults` is
 * whatever it defaults to now.
 */
const BEFORE = { maxConcurrentWorkflowTasks: 40, maxConcurrentProvisions: 100, maxConcurrentToolCalls: 100, maxConcurrentPolicyCalls: 64 };
export const SETUPS = {
  before: { tuning: BEFORE, sandboxSpawn: 'worker' },
  defaults: { tuning: {} },
  /** Today's defaults, but every sandbox command forked from the worker process (no spawn broker). */
  'spawn-in-worker': { tuning: {}, sandboxSpawn: 'worker' },
  /** Workflows in one process; provisioning, tool calls, verify, teardown and policy calls in another. */
  split: { tuning: {}, processes: [['workflows'], ['provision', 'host', 'policy']] },
  /** More workflow task slots and pollers (the workflow task backlog grows at the start of a big batch). */
  'wft-100': { tuning: { maxConcurrentWorkflowTasks: 100, workflowTaskPollers: 50 } },
  /** With --attempt-on host: attempts running on the host at once (the rest wait, provisioned, for a slot). */
  'attempts-50': { tuning: { maxConcurrentAttemptsOnHost: 50 } },
  'attempts-100': { tuning: { maxConcurrentAttemptsOnHost: 100 } },
  'attempts-200': { tuning: { maxConcurrentAttemptsOnHost: 200 } },
  'attempts-400': { tuning: { maxConcurrentAttemptsOnHost: 400 } },
} satisfies Record<string, WorkerSetup>;
export type SetupName = keyof typeof SETUPS;
