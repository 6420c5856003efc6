/** What every rollout section gets from bench/run.ts. */
export interface BenchContext {
  scratch: string;
  /** Copies of the bench task, one per group a batch may need. */
  taskDirs: string[];
  /** The prebuilt workflow bundle, as JSON, for the worker processes. */
  bundleFile: string;
  log: (line: string) => void;
  /** Where the rollouts' policy calls run (--policy-calls; the group default when absent). */
  policyCalls?: 'queue' | 'local';
}
