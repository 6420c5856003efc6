/**
 * What `rollout run` does after the first Ctrl-C/SIGTERM, and the lines it
 * prints. Embedded: the batch's unfinished groups are cancelled while the
 * workers still run (so every rollout's teardown runs), then the command stops
 * the workers and the server. Against a cluster: the client detaches and the
 * batch goes on; it says how to watch, collect or cancel it.
 */
import type { Client } from '@temporalio/client';
import type { GroupResult, ResolvedGroupInput } from '../../shared/pipeline.js';
import type { SubmittedBatch } from '../submitBatch.js';
import { cancelGroups } from './cancelGroups.js';
import { nextBatchId, rerunCommandLine, type ParsedValues } from './rerunCommandLine.js';

export interface StopContext {
  client: Client;
  batchId: string;
  /** Temporal address (for the commands printed). */
  address: string;
  embedded: boolean;
  signal: string;
  /** The batch as submitted, its inputs (same order), and the results the command already has. */
  batch: SubmittedBatch;
  inputs: ResolvedGroupInput[];
  finished: GroupResult[];
  /** The command's parsed options (to print the command that runs the cancelled groups again). */
  values: ParsedValues;
  /** How long to wait for cancelled rollouts to close (their teardowns). */
  waitMs?: number;
}

export interface StopOutcome {
  /** Groups that finished after all (before the cancel reached them): their results are kept. */
  finished: GroupResult[];
  lines: string[];
}

export async function stopAfterInterrupt(ctx: StopContext): Promise<StopOutcome> {
  const done = new Set(ctx.finished.map((g) => g.workflowId));
  const unfinished = ctx.batch.groups
    .map((g, i) => ({ taskId: g.taskId, taskDir: ctx.inputs[i]?.task.dir ?? g.taskId, workflowId: g.workflowId, groupSize: ctx.inputs[i]?.groupSize ?? 0 }))
    .filter((g) => !done.has(g.workflowId));
  const addressFlag = ctx.embedded ? '' : ` --address ${ctx.address}`;
  if (!ctx.embedded) {
    return {
      finished: [],
      lines: [
        `interrupted (${ctx.signal}): detached from batch ${ctx.batchId}; its ${unfinished.length} unfinished groups go on at ${ctx.address}.`,
        `  watch it:   rollout status ${ctx.batchId}${addressFlag}`,
        `  collect it: the same rollout run command again (it attaches to the running groups and writes the JSONL when they finish)`,
        `  cancel it:  rollout cancel --batch ${ctx.batchId}${addressFlag}`,
      ],
    };
  }
  if (unfinished.length === 0) return { finished: [], lines: [`interrupted (${ctx.signal}): every group of batch ${ctx.batchId} had finished; nothing to cancel.`] };
  process.stderr.write(`\ninterrupted (${ctx.signal}): cancelling ${unfinished.length} unfinished groups of batch ${ctx.batchId} and tearing their sandboxes down (Ctrl-C again exits at once)\n`);
  const report = await cancelGroups(ctx.client, ctx.batchId, unfinished, { waitMs: ctx.waitMs ?? 30_000 });
  const lines: string[] = [];
  const open = report.cancelled.flatMap((g) => g.stillOpen);
  if (report.cancelled.length > 0) {
    lines.push(`cancelled ${report.cancelled.length} groups of batch ${ctx.batchId}: ${report.cancelled.map((g) => g.taskId).join(', ')}`);
    lines.push(open.length === 0 ? 'every cancelled rollout tore its sandbox down.' : `${open.length} rollouts had not closed in time (${open.join(', ')}); the next start reaps their sandboxes.`);
    const rerun = rerunCommandLine(ctx.values, { tasks: report.cancelled.map((g) => g.taskDir), batchId: nextBatchId(ctx.batchId) });
    lines.push(`run them again: ${rerun}`);
  }
  if (report.finished.length > 0) lines.push(`${report.finished.length} more groups finished before the cancel reached them: ${report.finished.map((g) => g.taskId).join(', ')} (kept in the JSONL)`);
  return { finished: report.finished, lines };
}
