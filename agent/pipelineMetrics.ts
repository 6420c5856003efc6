/**
 * The metric instruments activities record on (names in shared/metricNames.ts).
 * Built on a Temporal MetricMeter, so they are exported by the worker's
 * Runtime next to the SDK's own metrics; a no-op meter when metrics are off.
 */
import { noopMetricMeter, type MetricMeter } from '@temporalio/common';
import { METRIC } from '../shared/metricNames.js';
import type { InferenceLoad } from '../policies/admission/inferenceLoad.js';

export interface PipelineMetrics {
  policyCall(model: string, latencyMs: number): void;
  policyError(model: string, failure: string): void;
  /** How long a policy call waited for room on the inference server. */
  policyAdmission(model: string, waitedMs: number): void;
  /** This worker's calls in flight to an inference server, and the server's load at its last reading. */
  inferenceLoad(server: string, inFlight: number, load: InferenceLoad | null): void;
  toolCall(tool: string, durationMs: number): void;
  sandboxesAlive(provider: string, count: number): void;
}

export function pipelineMetrics(meter: MetricMeter = noopMetricMeter): PipelineMetrics {
  const policyLatency = meter.createHistogram(METRIC.policyLatency, 'float', 'ms', 'Latency of successful policy (LLM) calls');
  const policyErrors = meter.createCounter(METRIC.policyErrors, undefined, 'Failed policy calls by failure class/type');
  const admissionWait = meter.createHistogram(METRIC.policyAdmissionWait, 'float', 'ms', 'Time policy calls waited for room on the inference server (not part of their latency)');
  const inFlight = meter.createGauge(METRIC.policyInFlight, 'int', undefined, "This worker's policy calls in flight, by inference server");
  const kvCache = meter.createGauge(METRIC.inferenceKvCacheUsage, 'float', undefined, 'KV cache fraction in use on the inference server, as it reports it');
  const running = meter.createGauge(METRIC.inferenceRequestsRunning, 'int', undefined, 'Requests the inference server is generating for');
  const waiting = meter.createGauge(METRIC.inferenceRequestsWaiting, 'int', undefined, 'Requests the inference server has queued');
  const toolCallDuration = meter.createHistogram(METRIC.toolCallDuration, 'float', 'ms', 'Duration of tool calls executed in sandboxes');
  const sandboxesAlive = meter.createGauge(METRIC.sandboxesAlive, 'int', undefined, "Sandboxes in this host's registry");
  return {
    policyCall: (model, latencyMs) => policyLatency.record(latencyMs, { model }),
    policyError: (model, failure) => policyErrors.add(1, { model, failure }),
    policyAdmission: (model, waitedMs) => admissionWait.record(waitedMs, { model }),
    inferenceLoad: (server, calls, load) => {
      inFlight.set(calls, { server });
      if (load?.kvCacheUsage != null) kvCache.set(load.kvCacheUsage, { server });
      if (load?.running != null) running.set(load.running, { server });
      if (load?.waiting != null) waiting.set(load.waiting, { server });
    },
    toolCall: (tool, durationMs) => toolCallDuration.record(durationMs, { tool }),
    sandboxesAlive: (provider, count) => sandboxesAlive.set(count, { provider }),
  };
}
