/** `rollout worker`: runs this machine's pipeline workers until Ctrl-C (or SIGTERM). */
import { startLocalPipeline } from '../../workers/startLocalPipeline.js';
import { temporalSettings } from '../../workers/temporalConnection.js';
import { dataDir, taskQueuesFor } from './cliSettings.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';
import { badBuildPart, DEFAULT_DEPLOYMENT_NAME } from '../../workers/versioning/workerDeployment.js';

const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v.trim() === '' ? undefined : v.trim());

export const workerUsage = `rollout worker [--address HOST:PORT] [--data-dir DIR] [--policy-rate N] [--metrics HOST:PORT] [--queue-prefix P] [--host-id ID] [--store S]
                [--build-id ID [--deployment-name NAME]] [--stop-grace SECONDS]
  Runs the pipeline workers of this machine (workflows, local sandboxes, policy calls).
  --policy-rate   policy calls per second across all workers (protects the inference server)
  --metrics       serve Prometheus metrics (Temporal SDK + pipeline) at http://HOST:PORT/metrics
  --queue-prefix  task queues P and P-policy instead of the defaults (rollout run --queue-prefix P submits there)
  --host-id       names this worker's sandbox host queue (default: the hostname)
  Temporal beyond a local dev server: TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_CLIENT_CERT_PATH and
  TEMPORAL_TLS_CLIENT_KEY_PATH (mTLS), TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME, TEMPORAL_TLS=true
  --build-id      the build this worker runs (env ROLLOUT_BUILD_ID): Worker Versioning, its rollouts pinned to it;
                  new rollouts go to the deployment's current version (temporal worker deployment set-current-version)
  --deployment-name  the Worker Deployment the build belongs to (env ROLLOUT_DEPLOYMENT_NAME, default rollout-pipeline)
  --stop-grace    on SIGTERM/SIGINT, stop taking work and let running tool calls and policy calls finish for up to
                  SECONDS before they are cancelled (env ROLLOUT_STOP_GRACE, default 0; a rolling upgrade wants it)
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
      'build-id': { type: 'string' },
      'deployment-name': { type: 'string' },
      'stop-grace': { type: 'string' },
    },
  });
  const rate = values['policy-rate'] === undefined ? undefined : Number(values['policy-rate']);
  if (rate !== undefined && !(rate > 0)) throw new UsageError(`--policy-rate must be a positive number, got ${JSON.stringify(values['policy-rate'])}`);
  if (values.metrics !== undefined && !/^[^\s:]+:\d{1,5}$/.test(values.metrics)) throw new UsageError(`--metrics ${JSON.stringify(values.metrics)}: give HOST:PORT, e.g. 0.0.0.0:9464`);
  if (values['host-id'] !== undefined && !/^[A-Za-z0-9._-]+$/.test(values['host-id'])) throw new UsageError(`--host-id ${JSON.stringify(values['host-id'])}: use letters, digits, '.', '_' and '-'`);
  const buildId = values['build-id'] ?? nonEmpty(process.env.ROLLOUT_BUILD_ID);
  const deploymentName = values['deployment-name'] ?? nonEmpty(process.env.ROLLOUT_DEPLOYMENT_NAME);
  if (deploymentName !== undefined && buildId === undefined)
    throw new UsageError(`--deployment-name ${JSON.stringify(deploymentName)} needs --build-id (the build of that deployment this worker runs)`);
  const build = buildId === undefined ? undefined : { deploymentName: deploymentName ?? DEFAULT_DEPLOYMENT_NAME, buildId };
  if (build) {
    const problem = badBuildPart('--build-id', build.buildId) ?? badBuildPart('--deployment-name', build.deploymentName);
    if (problem) throw new UsageError(problem);
  }
  const graceText = values['stop-grace'] ?? nonEmpty(process.env.ROLLOUT_STOP_GRACE);
  const grace = graceText === undefined ? undefined : Number(graceText);
  if (grace !== undefined && !(Number.isFinite(grace) && grace >= 0)) throw new UsageError(`--stop-grace ${JSON.stringify(graceText)}: give the seconds running calls may take to finish, e.g. 50`);
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
    ...(build ? { build } : {}),
    // After the grace, activities are cancelled; 10 s more and the worker stops even if one ignores that.
    ...(grace ? { stopWithin: { graceMs: grace * 1000, forceMs: grace * 1000 + 10_000 } } : {}),
  });
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
    void pipeline.done.then(resolve);
  });
  await pipeline.stop();
  return 0;
}
