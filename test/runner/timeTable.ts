/**
 * The table `npm test` prints at its end: every test file's wall and CPU time, sorted by wall time,
 * with what it mostly did (waited or computed) and its counts, then the totals.
 */
import type { FileResult } from './fileRun.js';

/** A file that kept under a third of a core busy waited (sleeps, servers, timeouts); over 0.7 computed. */
export function activity(r: Pick<FileResult, 'wallS' | 'cpuS'>): 'waits' | 'mixed' | 'computes' {
  const ratio = r.wallS > 0 ? r.cpuS / r.wallS : 0;
  if (ratio < 0.33) return 'waits';
  if (ratio > 0.7) return 'computes';
  return 'mixed';
}

function secs(n: number): string {
  return n.toFixed(1).padStart(7);
}

export function formatTimeTable(results: FileResult[], elapsedS: number): string {
  const rows = [...results].sort((a, b) => b.wallS - a.wallS);
  const width = Math.max(4, ...rows.map((r) => r.file.length));
  const lines = [
    `${'file'.padEnd(width)}  ${'wall s'.padStart(7)}  ${'cpu s'.padStart(7)}  cpu/wall  activity  pass  fail  skip  status`,
  ];
  for (const r of rows) {
    const c = r.counts;
    const status = r.killedBecause ? `KILLED: ${r.killedBecause}` : r.exitCode === 0 ? 'ok' : `FAILED (exit ${r.exitCode})`;
    lines.push(
      `${r.file.padEnd(width)}  ${secs(r.wallS)}  ${secs(r.cpuS)}  ${(r.wallS > 0 ? r.cpuS / r.wallS : 0).toFixed(2).padStart(8)}  ${activity(r).padEnd(8)}  ${String(c.pass).padStart(4)}  ${String(c.fail + c.cancelled).padStart(4)}  ${String(c.skipped + c.todo).padStart(4)}  ${status}`,
    );
  }
  const wall = results.reduce((s, r) => s + r.wallS, 0);
  const cpu = results.reduce((s, r) => s + r.cpuS, 0);
  lines.push(
    `${'total'.padEnd(width)}  ${secs(wall)}  ${secs(cpu)}  ${(wall > 0 ? cpu / wall : 0).toFixed(2).padStart(8)}  (${results.length} files; ${elapsedS.toFixed(0)} s elapsed side by side, ${(wall / Math.max(elapsedS, 1)).toFixed(1)} files at a time on average)`,
  );
  const byActivity = { waits: 0, mixed: 0, computes: 0 };
  for (const r of results) byActivity[activity(r)] += r.wallS;
  lines.push(
    `file time by activity: waits ${byActivity.waits.toFixed(0)} s, mixed ${byActivity.mixed.toFixed(0)} s, computes ${byActivity.computes.toFixed(0)} s (cpu/wall under 0.33 waits, over 0.7 computes)`,
  );
  return lines.join('\n');
}
