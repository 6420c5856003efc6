/**
 * Which test files start next: longest first, as many side by side as the machine holds.
 *
 * Every file has a weight (the cores it keeps busy on average, measured as CPU / wall in the last run
 * on this machine, else declared in schedule.ts) and may hold named locks, alone or shared (a reader
 * and a writer lock). A file starts when none of its locks conflicts with a running file's and the
 * running weights plus its own fit the budget; a file marked `alone` starts
 * only on an idle machine and nothing starts beside it. Whatever the budget, one file always runs, so
 * a file heavier than the budget still runs (by itself).
 */
export interface ScheduledFile {
  file: string;
  /** Expected wall seconds (last run here, else the declared estimate): longest start first. */
  expectedS: number;
  /** Cores it keeps busy on average. */
  weight: number;
  /** Named resources this file holds alone: no other running file holds or shares them (a port, the CPU-heavy slot). */
  locks: string[];
  /** Named resources this file shares with others that share them, but not with a file that holds them alone. */
  shares: string[];
  /** Needs the machine to itself. */
  alone: boolean;
}

export interface SchedulerLimits {
  /** Sum of running weights a new file must fit under (cores × overcommit: most files wait). */
  weightBudget: number;
  /** Most files at once. */
  maxFiles: number;
}

/**
 * Orders files longest first (ties by name, so runs are repeatable), a file on a lock by the length of
 * the lock's whole chain; files that need the machine alone go last, each once everything before it
 * has finished.
 */
export function longestFirst<T extends ScheduledFile>(files: T[]): T[] {
  // Files that hold a lock alone run one after another: that chain is as long as all of them, so each
  // ranks by the chain's whole length (the CPU-heavy suites start at once, not last and one by one).
  const chain = new Map<string, number>();
  for (const f of files) for (const l of f.locks) chain.set(l, (chain.get(l) ?? 0) + f.expectedS);
  const rank = (f: T): number => Math.max(f.expectedS, ...f.locks.map((l) => chain.get(l) ?? 0));
  return [...files].sort((a, b) => Number(a.alone) - Number(b.alone) || rank(b) - rank(a) || b.expectedS - a.expectedS || a.file.localeCompare(b.file));
}

/** The files of `waiting` (in its order) that may start now beside `running`. */
export function pickStartable<T extends ScheduledFile>(waiting: T[], running: T[], limits: SchedulerLimits): T[] {
  const started: T[] = [];
  const active = [...running];
  // Locks an earlier file waits to hold alone: later files may not take them, so sharers that keep
  // arriving cannot starve it.
  const reserved = new Set<string>();
  let heldRoom = 0;
  for (const f of waiting) {
    if (active.length >= limits.maxFiles) break;
    if (active.some((r) => r.alone)) break;
    if (f.alone) {
      if (active.length === 0) started.push(f);
      break;
    }
    const held = new Set(active.flatMap((r) => r.locks));
    const shared = new Set(active.flatMap((r) => r.shares));
    const blocked = f.locks.some((l) => held.has(l) || shared.has(l) || reserved.has(l)) || f.shares.some((l) => held.has(l) || reserved.has(l));
    if (blocked) {
      for (const l of f.locks) reserved.add(l);
      continue;
    }
    const load = active.reduce((s, r) => s + r.weight, 0);
    // The first file that did not fit keeps its room: files after it start only beside that room, so
    // light files arriving one after another cannot starve a heavier one ahead of them.
    if (active.length > 0 && load + f.weight + heldRoom > limits.weightBudget) {
      if (heldRoom === 0 && !f.locks.some((l) => reserved.has(l))) heldRoom = f.weight;
      continue;
    }
    started.push(f);
    active.push(f);
  }
  return started;
}
