/**
 * A `rollout worker` process with --metrics runs a real batch: its Prometheus
 * endpoint serves the Temporal SDK's metrics and the pipeline's (stage
 * durations, outcomes, policy latency, tool calls, sandboxes alive) with the
 * counts the batch implies, and every pino line about a rollout names its
 * workflow id, rollout index and attempt.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { submitBatch } from '../../client/submitBatch.js';
import { rolloutWorkflowId } from '../../shared/names.js';
import type { GroupResult } from '../../shared/pipeline.js';
import { janitorScheduleId } from '../../workers/janitorSchedule.js';
import { freePort } from '../../servers/temporalDevServer.js';
import { connectClient, uniqueTaskQueue } from '../helpers/temporal.js';
import { dataDirs, startWorkerProcess, type WorkerProcess } from '../helpers/workerProcess.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks');

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || line.startsWith('#')) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1] as string] = l[2] as string;
    samples.push({ name: m[1] as string, labels, value: Number(m[3]) });
  }
  return samples;
}

function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0);
}

describe('worker telemetry: Prometheus metrics and rollout-scoped logs', { timeout: 600_000 }, () => {
  const scratch = mkdtempSync(join(tmpdir(), 'telemetry-'));
  const prefix = uniqueTaskQueue('telemetry');
  const hostId = `${prefix}-host`;
  let worker: WorkerProcess;
  let metricsPort: number;
  let client: Awaited<ReturnType<typeof connectClient>>;
  const batchId = `telemetry-${Date.now()}`;
  let group: GroupResult | undefined;

  before(async () => {
    metricsPort = await freePort();
    worker = startWorkerProcess({ queuePrefix: prefix, hostId, metricsPort, ...dataDirs(scratch, 'w') });
    await worker.ready;
    client = await connectClient();
    const batch = await submitBatch(client.client, {
      batchId,
      taskQueues: { main: prefix, policy: `${prefix}-policy` },
      tasks: [join(examples, 'fix-median')],
      groupSize: 2,
      policy: { kind: 'scripted', script: 'mixed' },
    });
    for await (const g of batch.results()) group = g;
  });

  after(async () => {
    worker.kill('SIGTERM');
    await worker.exited;
    await client.client.schedule.getHandle(janitorScheduleId(hostId)).delete().catch(() => undefined);
    await client.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('the batch ran on the worker process', () => {
    assert.equal(group?.status, 'complete', group?.statusReason);
    assert.deepEqual(group?.rollouts.map((r) => r.reward), [1, 0]);
  });

  test('/metrics serves the SDK metrics and the pipeline metrics with the counts of the batch', async () => {
    const response = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    assert.equal(response.status, 200);
    const samples = parsePrometheus(await response.text());
    // The SDK's own (Runtime telemetry): workflow and activity task metrics.
    assert.ok(total(samples, 'temporal_workflow_completed', { workflow_type: 'rollout' }) >= 2, 'temporal_workflow_completed for the rollouts');
    assert.ok(samples.some((s) => s.name.startsWith('temporal_activity_execution_latency')), 'activity latency histograms from the SDK');
    // Ours: two rollouts finished ok, each with every stage recorded once.
    assert.equal(total(samples, 'rollout_outcomes', { outcome_class: 'ok', outcome_type: 'submitted' }), 2);
    for (const stage of ['queue', 'provision', 'agent', 'verify', 'teardown']) {
      assert.equal(total(samples, 'rollout_stage_duration_count', { stage }), 2, `stage ${stage} recorded per rollout`);
      assert.ok(samples.some((s) => s.name === 'rollout_stage_duration_bucket' && s.labels.stage === stage && s.labels.le === '1800000'), `${stage} uses the pipeline's duration buckets`);
    }
    // mixed: 3 policy turns per rollout (write, run, submit); 2 tool calls per rollout (write_file, bash).
    assert.equal(total(samples, 'rollout_policy_latency_count', { model: 'scripted:mixed' }), 6);
    assert.equal(total(samples, 'rollout_policy_errors'), 0);
    assert.equal(total(samples, 'rollout_tool_call_duration_count'), 4);
    assert.equal(total(samples, 'rollout_tool_call_duration_count', { tool: 'bash' }), 2);
    assert.equal(total(samples, 'rollout_sandboxes_alive', { provider: 'local' }), 0, 'every sandbox was torn down');
    // The guard on masking: one finished group, nothing masked.
    assert.equal(total(samples, 'rollout_group_masked_fraction_count', { status: 'complete' }), 1);
    assert.equal(total(samples, 'rollout_group_masked_fraction_sum'), 0);
    assert.equal(total(samples, 'rollout_masked_rollouts'), 0);
  });

  test('every log line about a rollout names its workflow id, rollout index and attempt', () => {
    const rolloutIds = [0, 1].map((i) => rolloutWorkflowId(batchId, 'fix-median', i));
    const about = worker.lines.filter((l) => typeof l.workflowId === 'string' && rolloutIds.includes(l.workflowId));
    const messages = new Set(about.map((l) => l.msg));
    for (const msg of ['sandbox provisioned', 'policy step', 'tool call', 'verified', 'sandbox torn down']) assert.ok(messages.has(msg), `a "${msg}" line (saw ${[...messages].join(', ')})`);
    for (const line of about) {
      const index = rolloutIds.indexOf(line.workflowId as string);
      assert.equal(line.rollout, index, `rollout index on ${JSON.stringify(line)}`);
      assert.equal(line.attempt, 0, `attempt on ${JSON.stringify(line)}`);
      assert.equal(typeof line.runId, 'string');
    }
    assert.equal(about.filter((l) => l.msg === 'tool call').length, 4);
    assert.ok(!worker.lines.some((l) => l.unparsed), 'stdout is pino JSON only');
  });
});
