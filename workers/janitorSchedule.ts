/**
 * One Temporal Schedule per sandbox host runs the janitor workflow every
 * minute, so sandboxes orphaned by terminated workflows, dead workers or
 * expired leases are removed even when nobody is watching. Idempotent: a
 * worker that starts again finds its schedule in place.
 */
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import { hostTaskQueue } from '../shared/names.js';

export function janitorScheduleId(host: string): string {
  return `rollout-janitor-${host}`;
}

export async function ensureJanitorSchedule(client: Client, options: { host: string; mainQueue: string; every?: string }): Promise<string> {
  const scheduleId = janitorScheduleId(options.host);
  try {
    await client.schedule.create({
      scheduleId,
      spec: { intervals: [{ every: options.every ?? '1 minute' }] },
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      action: {
        type: 'startWorkflow',
        workflowType: 'janitor',
        taskQueue: options.mainQueue,
        args: [{ hostQueue: hostTaskQueue(options.host) }],
        workflowId: `${scheduleId}-run`,
      },
    });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  return scheduleId;
}
