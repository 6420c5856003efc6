/** `rollout policy-version <batch> <version>`: the trainer's weights advanced; running groups record it with every later turn. */
import { batchServerFromFlags } from '../batchServer/batchServerFromFlags.js';
import { advancePolicyVersion } from '../policyVersion.js';
import { parseCommandLine } from './commandLine.js';
import { UsageError } from './usageError.js';

export const policyVersionUsage = `rollout policy-version <batch-id> <version> [--group WORKFLOW_ID]... [--data-dir DIR] [--address HOST:PORT]
  Tells the batch's running groups (or the named ones) that the policy endpoint now serves
  weights of <version> (an integer, never lower than a group's current version). Later turns
  record it; staleness.maxStaleness and onStale (keep, restart, drop_group) act on it.`;

export async function policyVersionCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    command: 'policy-version',
    usage: policyVersionUsage,
    options: { group: { type: 'string', multiple: true }, address: { type: 'string' }, 'data-dir': { type: 'string' } },
    allowPositionals: true,
  });
  const [batchId, versionText] = positionals;
  if (!batchId || versionText === undefined || positionals.length > 2) throw new UsageError(`name a batch id and a version\n${policyVersionUsage}`);
  if (!/^[A-Za-z0-9._-]+$/.test(batchId)) throw new UsageError(`batch id ${JSON.stringify(batchId)} has characters batch ids never have`);
  const version = Number(versionText);
  if (!Number.isInteger(version) || version < 0) throw new UsageError(`version must be an integer >= 0, got ${JSON.stringify(versionText)}`);
  const server = await batchServerFromFlags(values, batchId, { mutates: 'advancing the policy version' });
  const { client } = server;
  try {
    let advanced;
    try {
      advanced = await advancePolicyVersion(client, batchId, version, values.group);
    } catch (err) {
      const cause = (err as { cause?: { message?: string } }).cause?.message;
      throw new UsageError(cause ?? (err instanceof Error ? err.message : String(err)));
    }
    if (advanced.length === 0) {
      process.stdout.write(`no running groups in batch ${batchId}\n`);
      return 1;
    }
    for (const g of advanced) process.stdout.write(`${g.workflowId}: policy version ${g.previous} → ${g.current} (${g.notified} running rollouts told)\n`);
    return 0;
  } finally {
    await server.close();
  }
}
