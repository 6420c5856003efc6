import type { GroupInput } from '../shared/pipeline.js';

/** Where a batch's policy calls and attempts run and how they resume (group.policyCalls, group.attemptOn, group.failurePolicy.resume). */
export type Placement = Pick<GroupInput, 'policyCalls' | 'attemptOn'> & { failurePolicy?: { resume: 'replay' | 'restart' } };

/** What every rollout section gets from bench/run.ts. */
export interface BenchContext {
  scratch: string;
  /** Copies of the bench task, one per group a batch may need. */
  taskDirs: string[];
  /** The prebuilt workflow bundle, as JSON, for the worker processes. */
  bundleFile: string;
  log: (line: string) => void;
  /** Where the rollouts' policy calls and attempts run (--policy-calls, --attempt-on, --resume; the group defaults when absent). */
  placement?: Placement;
}
