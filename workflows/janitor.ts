/**
 * The janitor: run by a Temporal Schedule per sandbox host (see
 * workers/janitorSchedule.ts), it asks that host to reap every sandbox whose
 * owner is closed or whose lease expired.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { PipelineActivities } from '../activities/createActivities.js';
import type { ReapReport } from '../activities/reaper/reapSandboxes.js';

export interface JanitorInput {
  hostQueue: string;
  dryRun?: boolean;
}

export async function janitor(input: JanitorInput): Promise<ReapReport> {
  const { reapSandboxes } = proxyActivities<PipelineActivities>({
    taskQueue: input.hostQueue,
    // A host that is down has nothing to reap until it is back; the next scheduled run tries again.
    scheduleToStartTimeout: '1 minute',
    startToCloseTimeout: '10 minutes',
    retry: { maximumAttempts: 2 },
  });
  return reapSandboxes({ dryRun: input.dryRun ?? false });
}
