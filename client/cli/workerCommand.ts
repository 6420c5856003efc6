/** `rollout worker`: runs this machine's pipeline workers until Ctrl-C (or SIGTERM). */
import { startLocalPipeline } from '../../workers/startLocalPipeline.js';
import { temporalSettings } from '../../workers/temporalConnection.js';
import { dataDir, taskQueuesFor } from './cliSettings.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';

export const workerUsage = `rollout worker [--address HOST:PORT] [--data-dir DIR] [--policy-rate N] [--metrics HOST:PORT] [--queue-prefix P] [--host-id ID] [--store S]
  Runs the pipeline workers of this machine (workflows, local sandboxes, policy calls).
  --policy-rate   policy calls per second across all workers (protects the inference server)
  --metrics       serve Prometheus metrics (Temporal SDK + pipeline) at http://HOST:PORT/metrics
  --queue-prefix  task queues P and P-policy instead of the defaults (rollout run --queue-prefix P submits there)
  --host-id       names this worker's sandbox host queue (default: the hostname)
  Temporal beyond a local dev server: TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_CLIENT_CERT_PATH and
  TEMPORAL_TLS_CLIENT_KEY_PATH (mTLS), TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME, TEMPORAL_TLS=true
  --store         where trajectories and rollout records go: fs (default, <data-dir>/trajectories),
                  fs:DIR, or postgres://user:password@host:5432/db (env ROLLOUT_STORE)`;

export async function workerCommand(argv: string[]): Promise<number> {
  const { values } = parseCommandLine(argv, {
    command: 'worker',
    usage: workerUsage,
    options: {
      address: { type: 'string' },
      'data-dir': { type: 'string' },
      'policy-rate': { type: 'string' },
      metrics: { type: 'string' },
      'queue-prefix': { type: 'string' },
      'host-id': { type: 'string' },
      store: { type: 'string' },
    },
  });
  const rate = values['policy-rate'] === undefined ? undefined : Number(values['policy-rate']);
  if (rate !== undefined && !(rate > 0)) throw new UsageError(`--policy-rate must be a positive number, got ${JSON.stringify(values['policy-rate'])}`);
  if (values.metrics !== undefined && !/^[^\s:]+:\d{1,5}$/.test(values.metrics)) throw new UsageError(`--metrics ${JSON.stringify(values.metrics)}: give HOST:PORT, e.g. 0.0.0.0:9464`);
  if (values['host-id'] !== undefined && !/^[A-Za-z0-9._-]+$/.test(values['host-id'])) throw new UsageError(`--host-id ${JSON.stringify(values['host-id'])}: use letters, digits, '.', '_' and '-'`);
  const taskQueues = taskQueuesFor(values['queue-prefix']);
  const store = values.store ?? process.env.ROLLOUT_STORE;
  const pipeline = await startLocalPipeline({
    temporal: temporalSettings(values.address),
    dataDir: dataDir(values['data-dir']),
    ...(rate ? { policyRatePerSecond: rate } : {}),
    ...(values.metrics ? { metricsAddress: values.metrics } : {}),
    ...(taskQueues ? { taskQueues } : {}),
    ...(values['host-id'] ? { hostId: values['host-id'] } : {}),
    ...(store !== undefined ? { store } : {}),
  });
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
    void pipeline.done.then(resolve);
  });
  await pipeline.stop();
  return 0;
}
