/**
 * The pipeline's own Prometheus metrics, declared once: workflows record
 * per-rollout stage durations and outcomes, activities record policy calls,
 * tool calls and sandboxes alive. They are served next to the Temporal SDK's
 * metrics (prefix `temporal_`) on the worker's `/metrics` endpoint.
 * No dependencies: workflow code imports this module.
 */
export const METRIC = {
  /** Histogram (ms) per rollout, tag `stage`: queue, provision, agent, verify, teardown. */
  stageDuration: 'rollout_stage_duration',
  /** Counter of finished rollouts, tags `outcome_class` (ok, model, infra, task, cancelled) and `outcome_type`. */
  outcomes: 'rollout_outcomes',
  /** Counter of attempts that ended in an infra failure and were retried or gave up, tag `outcome_type`. */
  attemptFailures: 'rollout_attempt_failures',
  /** Histogram (ms) of successful policy calls, tag `model`. */
  policyLatency: 'rollout_policy_latency',
  policyAdmissionWait: 'rollout_policy_admission_wait',
  policyInFlight: 'rollout_policy_in_flight',
  inferenceKvCacheUsage: 'rollout_inference_kv_cache_usage',
  inferenceRequestsRunning: 'rollout_inference_requests_running',
  inferenceRequestsWaiting: 'rollout_inference_requests_waiting',
  /** Counter of failed policy calls, tags `model` and `failure` (e.g. infra/policy_unavailable). */
  policyErrors: 'rollout_policy_errors',
  /** Histogram (ms) of tool calls executed in sandboxes, tag `tool`. */
  toolCallDuration: 'rollout_tool_call_duration',
  /** Counter of rollouts masked (left out of their group's baseline), tags `outcome_class` and `outcome_type`. */
  maskedRollouts: 'rollout_masked_rollouts',
  /** Histogram of the fraction of each finished group that was masked (0..1), tag `status`. */
  groupMaskedFraction: 'rollout_group_masked_fraction',
  /** Gauge: sandboxes in this host's registry, tag `provider`. */
  sandboxesAlive: 'rollout_sandboxes_alive',
} as const;

/** Histogram buckets in milliseconds, from a fast exec to a long agent stage. */
export const DURATION_BUCKETS_MS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000] as const;

export const DURATION_HISTOGRAMS = [METRIC.stageDuration, METRIC.policyLatency, METRIC.policyAdmissionWait, METRIC.toolCallDuration] as const;
