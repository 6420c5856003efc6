/**
 * The `rollout run` command line that runs some of a batch's tasks again:
 * the user's own options (as parsed), with --tasks, --batch-id and --out
 * replaced. A new batch id, because a cancelled rollout's trajectory (turns
 * already recorded) must not be mistaken for the new run's.
 */

export type ParsedValues = Record<string, string | boolean | (string | boolean)[] | undefined>;

function quote(arg: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** The next batch id for a re-run: `b` → `b-2`, `b-2` → `b-3`. */
export function nextBatchId(batchId: string): string {
  const m = /^(.*)-(\d+)$/.exec(batchId);
  return m ? `${m[1]}-${Number(m[2]) + 1}` : `${batchId}-2`;
}

export function rerunCommandLine(values: ParsedValues, replace: { tasks: string[]; batchId: string }): string {
  const args: string[] = [];
  for (const [name, value] of Object.entries(values)) {
    if (['tasks', 'batch-id', 'out'].includes(name) || value === undefined || value === false) continue;
    for (const v of Array.isArray(value) ? value : [value]) args.push(`--${name}`, ...(v === true ? [] : [String(v)]));
  }
  return ['rollout', 'run', ...args, ...replace.tasks.flatMap((t) => ['--tasks', t]), '--batch-id', replace.batchId].map(quote).join(' ');
}
