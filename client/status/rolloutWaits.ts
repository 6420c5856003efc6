/**
 * What the running rollouts of a batch are waiting for, from the server's own view of them: a call
 * no worker has picked up (and whether anything still polls its queue), a call whose worker stopped
 * heartbeating, a call being retried after a failure, a rollout the server cannot describe (its
 * history shard is unavailable). `rollout status` prints these while a cluster is degraded, so an
 * operator sees "tool call waiting 40 s on host host-b's queue, which no worker has polled for 38 s"
 * instead of a batch that merely stopped moving. Only what is out of the ordinary is reported.
 */
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';

const PendingActivityState = proto.temporal.api.enums.v1.PendingActivityState;
const TaskQueueType = proto.temporal.api.enums.v1.TaskQueueType;
type Timestamp = { seconds?: unknown; nanos?: number | null } | null | undefined;

/** A call not picked up within this long is reported (tool calls are picked up in milliseconds). */
const UNPICKED_MS = 10_000;
/** A started call whose last heartbeat is older than this is reported (calls heartbeat every few seconds). */
const SILENT_MS = 20_000;
/** How many running rollouts are described at most (status is for a person, not a scan). */
const MAX_ROLLOUTS = 200;

function millis(ts: Timestamp): number | undefined {
  if (!ts || ts.seconds === undefined || ts.seconds === null) return undefined;
  return Number(ts.seconds) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6);
}

const secs = (ms: number): string => `${Math.round(ms / 1000)} s`;

/** When a worker last polled `queue` for activities (undefined: none the server remembers). */
async function lastPoll(client: Client, queue: string): Promise<number | undefined> {
  const res = await client.workflowService.describeTaskQueue({ namespace: client.options.namespace, taskQueue: { name: queue }, taskQueueType: TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY });
  const times = (res.pollers ?? []).map((p) => millis(p.lastAccessTime)).filter((t): t is number => t !== undefined);
  return times.length ? Math.max(...times) : undefined;
}

/** One line per running rollout of `batchId` that waits on something out of the ordinary. */
export async function rolloutWaits(client: Client, batchId: string, now: () => number = Date.now): Promise<string[]> {
  const ids: string[] = [];
  for await (const wf of client.workflow.list({ query: `RolloutBatch="${batchId}" AND WorkflowType="rollout" AND ExecutionStatus="Running"` })) {
    ids.push(wf.workflowId);
    if (ids.length >= MAX_ROLLOUTS) break;
  }
  const polls = new Map<string, Promise<number | undefined>>();
  const lines: string[] = [];
  for (const id of ids) {
    let raw;
    try {
      ({ raw } = await client.workflow.getHandle(id).describe());
    } catch (err) {
      lines.push(`${id}: the server could not describe it (${err instanceof Error ? err.message : String(err)}); the history shard that owns it may be unavailable`);
      continue;
    }
    for (const a of raw.pendingActivities ?? []) {
      const name = a.activityType?.name ?? 'activity';
      const queue = a.activityOptions?.taskQueue?.name ?? undefined;
      const t = now();
      if (a.state === PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED) {
        const since = millis(a.scheduledTime);
        if (since === undefined || t - since < UNPICKED_MS) continue;
        let pollers = '';
        if (queue) {
          if (!polls.has(queue)) polls.set(queue, lastPoll(client, queue).catch(() => undefined));
          const last = await polls.get(queue);
          pollers = last === undefined ? ', which no worker has polled recently' : t - last > UNPICKED_MS ? `, which no worker has polled for ${secs(t - last)}` : '';
        }
        const failure = a.lastFailure?.message ? ` (attempt ${a.attempt}; last: ${a.lastFailure.message})` : '';
        lines.push(`${id}: ${name} waiting ${secs(t - since)} for a worker on ${queue ?? 'its task queue'}${pollers}${failure}`);
      } else if (a.state === PendingActivityState.PENDING_ACTIVITY_STATE_STARTED) {
        const beat = millis(a.lastHeartbeatTime) ?? millis(a.lastStartedTime);
        if (beat !== undefined && t - beat > SILENT_MS)
          lines.push(
            `${id}: ${name} on ${a.lastWorkerIdentity || 'a worker'}: no heartbeat for ${secs(t - beat)} (the server retries it once its heartbeat timeout passes)`,
          );
      }
    }
  }
  return lines;
}
