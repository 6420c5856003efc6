/**
 * An embedded run that was cut short (second Ctrl-C, SIGKILL, crash) leaves
 * its groups open in `<data-dir>/temporal.sqlite`; with the same data
 * directory the next embedded start would resume them behind the user's
 * back. Instead it cancels them (their rollouts tear their sandboxes down)
 * and says so.
 */
import type { Client } from '@temporalio/client';
import { readMarker } from './embeddedRunMarker.js';

const count = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? '' : 's'}`;

async function runningIds(client: Client, query: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const wf of client.workflow.list({ query })) ids.push(wf.workflowId);
  return ids;
}

/** Cancels what the marked run (a process that is gone: the caller checked) left open; returns a line to print, or undefined when nothing was left. */
export async function cancelLeftoverRun(client: Client, dataDir: string, options: { waitMs: number; except?: string }): Promise<string | undefined> {
  const marker = readMarker(dataDir);
  // The same batch submitted again attaches to its open groups: they resume rather than being cancelled.
  if (!marker || marker.batchId === options.except) return undefined;
  const batch = `RolloutBatch="${marker.batchId}" AND ExecutionStatus="Running"`;
  const groups = await runningIds(client, `${batch} AND WorkflowType="rolloutGroup"`);
  // A group cancelled just before the run died may be closed already while its rollouts, cancelled by
  // the parent-close policy, still wait for a worker: those are what hold sandboxes.
  const rollouts = await runningIds(client, `${batch} AND WorkflowType="rollout"`);
  if (groups.length === 0 && rollouts.length === 0) return undefined;
  // Each rollout's teardown runs in its finally, whichever of the two cancels reaches it first.
  await Promise.all([...groups, ...rollouts].map((id) => client.workflow.getHandle(id).cancel().catch(() => undefined)));
  const deadline = Date.now() + options.waitMs;
  let open = rollouts;
  while (open.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    open = await runningIds(client, `${batch} AND WorkflowType="rollout"`);
  }
  const still = open.length > 0 ? `; ${count(open.length, 'rollout')} had not closed yet (the janitor reaps their sandboxes)` : '; their sandboxes were torn down';
  return `batch ${marker.batchId} was interrupted (started ${marker.startedAt} by pid ${marker.process.pid}): cancelled what it left open (${count(groups.length, 'group')}, ${count(rollouts.length, 'rollout')})${still}`;
}
