/**
 * One activity of the pipeline with fixed options, called with a one-line summary that the
 * Temporal UI shows for that call (`turn 7: bash: pytest -x`), as a task on a queue or as a
 * local activity of the calling workflow's worker (a marker in the history, with its summary).
 */
import { CancellationScope, proxyActivities, proxyLocalActivities, type ActivityOptions, type LocalActivityOptions } from '@temporalio/workflow';
import type { PipelineActivities } from '../../activities/createActivities.js';

export type Activities = PipelineActivities;
export type ActivityName = Exclude<keyof Activities, symbol>;
/** A call of activity K: its summary first, then the activity's own arguments. */
export type SummarizedCall<K extends ActivityName> = (summary: string, ...args: Parameters<Activities[K]>) => Promise<Awaited<ReturnType<Activities[K]>>>;

export function activity<K extends ActivityName>(name: K, options: ActivityOptions): SummarizedCall<K> {
  const fn = proxyActivities<Activities>(options)[name] as unknown as {
    executeWithOptions(options: ActivityOptions, args: Parameters<Activities[K]>): Promise<Awaited<ReturnType<Activities[K]>>>;
  };
  return (summary, ...args) => fn.executeWithOptions({ ...options, summary }, args);
}

export function localActivity<K extends ActivityName>(name: K, options: LocalActivityOptions): SummarizedCall<K> {
  const fn = proxyLocalActivities<Activities>(options)[name] as unknown as {
    executeWithOptions(options: LocalActivityOptions, args: Parameters<Activities[K]>): Promise<Awaited<ReturnType<Activities[K]>>>;
  };
  return (summary, ...args) => fn.executeWithOptions({ ...options, summary }, args);
}

/**
 * A local activity the workflow never cancels while it runs: a cancel of the calling scope takes
 * effect before the call starts or once it has ended. Its worker runs it to its end anyway (it also
 * cancels it when it evicts the run, and a cut command could have done its work without its record:
 * activities/heartbeats.ts); a cancel sent to a call that then completes would reach core's
 * state machine after the call was resolved as cancelled.
 */
export function localActivityRunToEnd<K extends ActivityName>(name: K, options: LocalActivityOptions): SummarizedCall<K> {
  const call = localActivity(name, options);
  return async (summary: string, ...args: Parameters<Activities[K]>): Promise<Awaited<ReturnType<Activities[K]>>> => {
    const scope = CancellationScope.current();
    if (scope.consideredCancelled) await scope.cancelRequested;
    const result = await CancellationScope.nonCancellable<Awaited<ReturnType<Activities[K]>>>(() => call(summary, ...args));
    if (scope.consideredCancelled) await scope.cancelRequested;
    return result;
  };
}
