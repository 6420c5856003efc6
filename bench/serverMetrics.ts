/**
 * Counters the Temporal server exposes on its Prometheus endpoints (one per service process in the
 * cluster, one for the whole dev server), read before and after a batch:
 * - state transitions: the history service's `state_transition_count` histogram is observed once per
 *   persisted mutable-state write (its value is that workflow's running total, so its _sum is not the
 *   count; its _count is);
 * - shard writes: history `persistence_requests` of CreateWorkflowExecution, UpdateWorkflowExecution
 *   and ConflictResolveWorkflowExecution (each one held the shard's single I/O slot,
 *   history.shardIOConcurrency = 1), and the mean latency of UpdateWorkflowExecution;
 * - workflow and activity tasks: the frontend's RespondWorkflowTask* and RespondActivityTask* calls
 *   (eagerly dispatched activities included), and activity heartbeats.
 */

export type ServerCounters = {
  stateTransitions: number;
  shardWrites: number;
  updateLatencySumMs: number;
  updateLatencyCount: number;
  workflowTasks: number;
  activityTasks: number;
  heartbeats: number;
};

const SHARD_WRITES = new Set(['CreateWorkflowExecution', 'UpdateWorkflowExecution', 'ConflictResolveWorkflowExecution']);

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1] as string] = l[2] as string;
    out.push({ name: m[1] as string, labels, value: Number(m[3]) });
  }
  return out;
}

export function countersOf(samples: Sample[]): ServerCounters {
  const c: ServerCounters = { stateTransitions: 0, shardWrites: 0, updateLatencySumMs: 0, updateLatencyCount: 0, workflowTasks: 0, activityTasks: 0, heartbeats: 0 };
  for (const s of samples) {
    const op = s.labels.operation ?? '';
    const service = s.labels.service_name;
    if (s.name === 'state_transition_count_count') c.stateTransitions += s.value;
    else if (s.name === 'persistence_requests' && service === 'history' && SHARD_WRITES.has(op)) c.shardWrites += s.value;
    else if (s.name === 'persistence_latency_sum' && service === 'history' && op === 'UpdateWorkflowExecution') c.updateLatencySumMs += s.value * 1000;
    else if (s.name === 'persistence_latency_count' && service === 'history' && op === 'UpdateWorkflowExecution') c.updateLatencyCount += s.value;
    else if (s.name === 'service_requests' && service === 'frontend') {
      if (/^RespondWorkflowTask(Completed|Failed)$/.test(op)) c.workflowTasks += s.value;
      else if (/^RespondActivityTask(Completed|Failed|Canceled)(ById)?$/.test(op)) c.activityTasks += s.value;
      else if (/^RecordActivityTaskHeartbeat(ById)?$/.test(op)) c.heartbeats += s.value;
    }
  }
  return c;
}

/** The counters summed over every endpoint; an endpoint that does not answer is an error naming it. */
export async function scrapeServer(urls: string[]): Promise<ServerCounters> {
  const texts = await Promise.all(
    urls.map(async (url) => {
      try {
        const r = await fetch(url, { signal: AbortSignal.timeout(10_000) });
        if (!r.ok) throw new Error(`HTTP ${r.status}`);
        return await r.text();
      } catch (err) {
        throw new Error(`the Temporal metrics endpoint ${url} did not answer (${err instanceof Error ? err.message : String(err)}): is that service process running?`);
      }
    }),
  );
  return countersOf(texts.flatMap(parsePrometheus));
}
