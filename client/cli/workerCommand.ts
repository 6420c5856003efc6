/** `rollout worker`: runs this machine's pipeline workers until Ctrl-C. */
import { parseArgs } from 'node:util';
import { startLocalPipeline } from '../../workers/startLocalPipeline.js';
import { dataDir, temporalAddress } from './cliSettings.js';
import { UsageError } from './usageError.js';

export const workerUsage = `rollout worker [--address HOST:PORT] [--data-dir DIR] [--policy-rate N]
  Runs the pipeline workers of this machine (workflows, local sandboxes, policy calls).
  --policy-rate  policy calls per second across all workers (protects the inference server)`;

export async function workerCommand(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { address: { type: 'string' }, 'data-dir': { type: 'string' }, 'policy-rate': { type: 'string' } },
    strict: true,
  });
  const rate = values['policy-rate'] === undefined ? undefined : Number(values['policy-rate']);
  if (rate !== undefined && !(rate > 0)) throw new UsageError(`--policy-rate must be a positive number, got ${JSON.stringify(values['policy-rate'])}`);
  const pipeline = await startLocalPipeline({ address: temporalAddress(values.address), dataDir: dataDir(values['data-dir']), ...(rate ? { policyRatePerSecond: rate } : {}) });
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
    void pipeline.done.then(resolve);
  });
  await pipeline.stop();
  return 0;
}
