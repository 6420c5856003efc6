/** The batch server of a `rollout` command, from its --address and --data-dir flags (openBatchServer.ts). */
import { temporalSettings } from '../../workers/temporalConnection.js';
import { dataDir } from '../cli/cliSettings.js';
import { NoServerError, openBatchServer, type BatchServer } from './openBatchServer.js';

const DEFAULT_ADDRESSES = new Set(['127.0.0.1:7233', 'localhost:7233']);

/** The batch id in a pipeline workflow id (rollout/<batch>/<task>[/<index>]); undefined for any other id. */
export function batchOfWorkflowId(workflowId: string): string | undefined {
  const [kind, batch] = workflowId.split('/');
  return kind === 'rollout' && batch ? batch : undefined;
}

export async function batchServerFromFlags(
  values: { address?: string | undefined; 'data-dir'?: string | undefined },
  batchId: string | undefined,
  options: { mutates?: string; waitForServerMs?: number } = {},
): Promise<BatchServer> {
  const settings = temporalSettings(values.address);
  const data = dataDir(values['data-dir']);
  // Where the batch was found is said once the command will act on it (not before a refusal).
  const notes: string[] = [];
  const server = await openBatchServer({
    note: (line) => notes.push(line),
    settings,
    addressGiven: !DEFAULT_ADDRESSES.has(settings.address),
    dataDir: data,
    batchId,
    ...(options.waitForServerMs !== undefined ? { waitForServerMs: options.waitForServerMs } : {}),
  });
  if (options.mutates && server.offline) {
    await server.close();
    throw new NoServerError(
      `batch ${batchId ?? ''} is in ${server.where}, where no workers run: ${options.mutates} needs them. ` +
        `Fix: serve it (\`npx rollout server --db-filename ${data}/temporal.sqlite\` and \`npx rollout worker\`), then run this again`,
    );
  }
  for (const line of notes) process.stderr.write(`${line}\n`);
  return server;
}
