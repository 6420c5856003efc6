/**
 * The metric instruments activities record on (names in shared/metricNames.ts).
 * Built on a Temporal MetricMeter, so they are exported by the worker's
 * Runtime next to the SDK's own metrics; a no-op meter when metrics are off.
 */
import { noopMetricMeter, type MetricMeter } from '@temporalio/common';
import { METRIC } from '../shared/metricNames.js';

export interface PipelineMetrics {
  policyCall(model: string, latencyMs: number): void;
  policyError(model: string, failure: string): void;
  toolCall(tool: string, durationMs: number): void;
  sandboxesAlive(provider: string, count: number): void;
}

export function pipelineMetrics(meter: MetricMeter = noopMetricMeter): PipelineMetrics {
  const policyLatency = meter.createHistogram(METRIC.policyLatency, 'float', 'ms', 'Latency of successful policy (LLM) calls');
  const policyErrors = meter.createCounter(METRIC.policyErrors, undefined, 'Failed policy calls by failure class/type');
  const toolCallDuration = meter.createHistogram(METRIC.toolCallDuration, 'float', 'ms', 'Duration of tool calls executed in sandboxes');
  const sandboxesAlive = meter.createGauge(METRIC.sandboxesAlive, 'int', undefined, "Sandboxes in this host's registry");
  return {
    policyCall: (model, latencyMs) => policyLatency.record(latencyMs, { model }),
    policyError: (model, failure) => policyErrors.add(1, { model, failure }),
    toolCall: (tool, durationMs) => toolCallDuration.record(durationMs, { tool }),
    sandboxesAlive: (provider, count) => sandboxesAlive.set(count, { provider }),
  };
}
