/**
 * Where a rollout's wall time went, from its workflow history: for every
 * activity, the wait for a worker (scheduled -> started) and the run
 * (started -> completed), by activity type; for every workflow task, the
 * wait (scheduled -> started) and the run (started -> completed). A
 * rollout's steps are sequential, so these add up to nearly its end to end;
 * what the bare loop does not pay is everything but the activities' runs.
 */
import type { Client } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time.js';
import type { temporal } from '@temporalio/proto';

export interface RolloutBreakdown {
  /** Mean per rollout, ms. */
  activityWaitMs: number;
  activityRunMs: Record<string, number>;
  workflowTaskWaitMs: number;
  workflowTaskRunMs: number;
  workflowTasks: number;
  /** Activity tasks scheduled per rollout (local activities are not tasks: they run inside a workflow task). */
  activityTasks: number;
  /** Start to close. */
  totalMs: number;
  /** totalMs less everything above (time between events, e.g. history writes). */
  otherMs: number;
  sampled: number;
}

export async function historyBreakdown(client: Client, workflowIds: string[]): Promise<RolloutBreakdown | null> {
  const acc = { activityWait: 0, activityRun: {} as Record<string, number>, wftWait: 0, wftRun: 0, wfts: 0, activityTasks: 0, total: 0 };
  let sampled = 0;
  for (const id of workflowIds) {
    const events = (await client.workflow.getHandle(id).fetchHistory()).events ?? [];
    // A rollout whose attempts ran on their host (group.attemptOn 'host'): their workflows' tasks count too.
    for (const e of [...events]) {
      const childId = e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId;
      if (childId) accumulate((await client.workflow.getHandle(childId).fetchHistory()).events ?? [], false);
    }
    accumulate(events, true);
    sampled++;
  }
  function accumulate(events: temporal.api.history.v1.IHistoryEvent[], isRollout: boolean): void {
    const time = new Map<number, number>();
    const typeOf = new Map<number, string>();
    let first: number | undefined;
    let last = 0;
    for (const e of events) {
      const t = tsToMs(e.eventTime);
      const eventId = Number(e.eventId);
      time.set(eventId, t);
      first ??= t;
      last = t;
      if (e.activityTaskScheduledEventAttributes) {
        typeOf.set(eventId, e.activityTaskScheduledEventAttributes.activityType?.name ?? '?');
        acc.activityTasks++;
      }
      const started = e.activityTaskStartedEventAttributes;
      if (started) acc.activityWait += t - (time.get(Number(started.scheduledEventId)) ?? t);
      const done = e.activityTaskCompletedEventAttributes ?? e.activityTaskFailedEventAttributes ?? e.activityTaskTimedOutEventAttributes;
      if (done && 'startedEventId' in done) {
        const name = typeOf.get(Number(done.scheduledEventId)) ?? '?';
        acc.activityRun[name] = (acc.activityRun[name] ?? 0) + t - (time.get(Number(done.startedEventId)) ?? t);
      }
      const wftStarted = e.workflowTaskStartedEventAttributes;
      if (wftStarted) {
        acc.wftWait += t - (time.get(Number(wftStarted.scheduledEventId)) ?? t);
        acc.wfts++;
      }
      const wftDone = e.workflowTaskCompletedEventAttributes ?? e.workflowTaskFailedEventAttributes;
      if (wftDone) acc.wftRun += t - (time.get(Number(wftDone.startedEventId)) ?? t);
    }
    if (isRollout) acc.total += last - (first ?? last);
  }
  if (sampled === 0) return null;
  const mean = (n: number): number => n / sampled;
  const activityRunMs = Object.fromEntries(Object.entries(acc.activityRun).map(([k, v]) => [k, mean(v)]));
  const accounted = mean(acc.activityWait) + Object.values(activityRunMs).reduce((a, b) => a + b, 0) + mean(acc.wftWait) + mean(acc.wftRun);
  return {
    activityWaitMs: mean(acc.activityWait),
    activityRunMs,
    workflowTaskWaitMs: mean(acc.wftWait),
    workflowTaskRunMs: mean(acc.wftRun),
    workflowTasks: acc.wfts / sampled,
    activityTasks: acc.activityTasks / sampled,
    totalMs: mean(acc.total),
    otherMs: mean(acc.total) - accounted,
    sampled,
  };
}
