/**
 * The janitor: run by a Temporal Schedule per sandbox host (see
 * workers/janitorSchedule.ts), it asks that host to reap every sandbox whose
 * owner is closed or whose lease expired.
 */
import { proxyActivities, setWorkflowOptions, workflowInfo } from '@temporalio/workflow';
import type { PipelineActivities } from '../activities/createActivities.js';
import type { ReapReport } from '../activities/contract.js';
import { HEARTBEAT_TIMEOUT } from './heartbeatTimeout.js';

export interface JanitorInput {
  hostQueue: string;
  dryRun?: boolean;
}

/**
 * Not pinned, unlike rollouts: a run started on a build whose workers then leave (a rolling upgrade)
 * moves to the current build for its next workflow task. Pinned, it was stranded there (2 of 5
 * upgrades in the chaos suite), and its schedule (overlap SKIP) started no run after it. Its code is
 * one activity call, so a run that continues on a newer build replays the same commands. Only on a
 * versioned worker: an unversioned one (no deployment name) may not name a behavior (the server
 * rejects the workflow task: "versioning behavior cannot be specified without deployment options").
 */
setWorkflowOptions(() => (workflowInfo().currentDeploymentVersion?.deploymentName ? { versioningBehavior: 'AUTO_UPGRADE' } : {}), janitor);

export async function janitor(input: JanitorInput): Promise<ReapReport> {
  const { reapSandboxes } = proxyActivities<PipelineActivities>({
    taskQueue: input.hostQueue,
    // A host that is down has nothing to reap until it is back; the next scheduled run tries again.
    scheduleToStartTimeout: '1 minute',
    startToCloseTimeout: '10 minutes',
    // A pass whose worker died or lost its poll (a host killed, a Temporal service restarted) is
    // noticed in seconds: without it the run waited out the 10 minutes, and its schedule (overlap
    // SKIP) started no pass on that host meanwhile.
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: { maximumAttempts: 2 },
  });
  return reapSandboxes({ dryRun: input.dryRun ?? false });
}
