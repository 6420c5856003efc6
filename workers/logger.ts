/**
 * pino JSON logs for workers, and the process's Temporal Runtime: the SDK's
 * own log lines go through the same logger (warnings and errors only, unless
 * TEMPORAL_LOG_LEVEL says otherwise) with their context (workflowId, runId,
 * activityType, ...) as top-level fields, and when a metrics address is given
 * the Runtime serves Prometheus metrics: the SDK's own and the pipeline's
 * (agent/pipelineMetrics.ts, workflow metricMeter), on one endpoint.
 */
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import { pino, type Logger } from 'pino';
import { DURATION_BUCKETS_MS, DURATION_HISTOGRAMS } from '../shared/metricNames.js';

/** pino JSON on stdout, or appended to `file` (its folder made) when given. */
export function createLogger(name = 'rollout-pipeline', file?: string): Logger {
  const options = { name, level: process.env.LOG_LEVEL ?? 'info' };
  return file ? pino(options, pino.destination({ dest: file, mkdir: true, sync: true })) : pino(options);
}

/**
 * The SDK warns when a worker registers no workflows. Our host and policy workers are
 * activity-only by design (their own task queues; workflows run on the main worker), so
 * for them that line says nothing is wrong: it is logged at debug, every other SDK warning as is.
 */
const ACTIVITY_ONLY_NOTICE = 'No workflows registered, not polling for workflow tasks';

export interface RuntimeSettings {
  /** host:port for Prometheus `/metrics`; no metrics endpoint when absent. */
  metricsAddress?: string;
  /**
   * Signals on which the Runtime shuts every worker down by itself (the SDK's default: SIGINT, SIGTERM,
   * SIGQUIT, SIGUSR2). `[]` when the process handles its signals itself and must decide the order
   * (cancel the batch's groups while the workers still run, then stop them).
   */
  shutdownSignals?: NodeJS.Signals[];
}

let installed: RuntimeSettings | undefined;

/**
 * Installs the Temporal Runtime of this process. Call before creating any
 * connection or worker; later calls do nothing (the first one wins).
 */
export function installRuntime(logger: Logger, settings: RuntimeSettings = {}): void {
  if (installed) return;
  installed = settings;
  const level = (process.env.TEMPORAL_LOG_LEVEL ?? 'WARN') as LogLevel;
  try {
    Runtime.install({
      ...(settings.shutdownSignals ? { shutdownSignals: settings.shutdownSignals } : {}),
      logger: new DefaultLogger(level, (entry) => {
        const method = entry.message === ACTIVITY_ONLY_NOTICE ? 'debug' : entry.level === 'ERROR' ? 'error' : entry.level === 'WARN' ? 'warn' : entry.level === 'INFO' ? 'info' : 'debug';
        logger[method]({ ...entry.meta, sdk: true }, entry.message);
      }),
      ...(settings.metricsAddress
        ? {
            telemetryOptions: {
              metrics: {
                prometheus: {
                  bindAddress: settings.metricsAddress,
                  histogramBucketOverrides: Object.fromEntries(DURATION_HISTOGRAMS.map((name) => [name, [...DURATION_BUCKETS_MS]])),
                },
              },
            },
          }
        : {}),
    });
  } catch (err) {
    if (settings.metricsAddress) throw new Error(`cannot serve metrics on ${settings.metricsAddress}: the Temporal Runtime of this process was already created (${String(err)})`);
    // a Runtime already exists in this process (a test created a connection first): keep it
  }
}
