/**
 * The cluster benchmark's readings, on the text the real sources give: where cpuacct is mounted
 * (a /proc/mounts of a cgroup v1 hybrid host, and of a cgroup v2-only host), the counters out of
 * Temporal's Prometheus text (state transitions are the histogram's _count, not its _sum), and WAL
 * positions spelled as PostgreSQL does.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cpuacctMount } from '../../bench/cgroupCpu.js';
import { lsnOf } from '../../bench/pgCounters.js';
import { countersOf, parsePrometheus } from '../../bench/serverMetrics.js';

test('cpuacct is found wherever this host mounts it, and not on a v2-only host', () => {
  const hybrid = [
    'tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0',
    'cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0',
    'cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0',
    'cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0',
  ].join('\n');
  assert.equal(cpuacctMount(hybrid), '/sys/fs/cgroup/cpuacct');
  assert.equal(cpuacctMount('cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0'), '/sys/fs/cgroup/cpu,cpuacct');
  assert.equal(cpuacctMount('cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev 0 0'), undefined);
});

test('server counters: transitions from the histogram count, shard writes and latency from history, tasks from the frontend', () => {
  const text = [
    '# TYPE state_transition_count histogram',
    'state_transition_count_sum{namespace="default",operation="WorkflowContext",service_name="history"} 11576',
    'state_transition_count_count{namespace="default",operation="WorkflowContext",service_name="history"} 385',
    'persistence_requests{operation="UpdateWorkflowExecution",service_name="history"} 300',
    'persistence_requests{operation="CreateWorkflowExecution",service_name="history"} 20',
    'persistence_requests{operation="GetWorkflowExecution",service_name="history"} 999',
    'persistence_requests{operation="UpdateWorkflowExecution",service_name="matching"} 7',
    'persistence_latency_sum{operation="UpdateWorkflowExecution",service_name="history"} 1.5',
    'persistence_latency_count{operation="UpdateWorkflowExecution",service_name="history"} 300',
    'service_requests{operation="RespondWorkflowTaskCompleted",service_name="frontend"} 143',
    'service_requests{operation="RespondWorkflowTaskCompleted",service_name="history"} 143',
    'service_requests{operation="RespondActivityTaskCompleted",service_name="frontend"} 108',
    'service_requests{operation="RespondActivityTaskFailedById",service_name="frontend"} 2',
    'service_requests{operation="RecordActivityTaskHeartbeat",service_name="frontend"} 96',
  ].join('\n');
  assert.deepEqual(countersOf(parsePrometheus(text)), {
    stateTransitions: 385,
    shardWrites: 320,
    updateLatencySumMs: 1500,
    updateLatencyCount: 300,
    workflowTasks: 143,
    activityTasks: 110,
    heartbeats: 96,
  });
});

test('WAL positions in bytes are spelled X/Y as pg_waldump reads them', () => {
  assert.equal(lsnOf(0x236b520), '0/236B520');
  assert.equal(lsnOf(2 ** 32 + 16), '1/10');
});
