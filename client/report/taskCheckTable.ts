/**
 * One line per task of a `rollout task check` over a collection: the verdict
 * of each part, the network the task ran with, and where the time went.
 */
import type { TaskCheckCase, TaskCheckReport } from '../taskTools/checkTask.js';

function caseVerdict(c: TaskCheckCase | undefined): string {
  if (!c) return '-';
  if (c.error !== undefined) return 'error';
  return c.passed ? 'ok' : `BAD (${c.reward ?? 'none'})`;
}

function redTeamVerdict(report: TaskCheckReport): string {
  if ('error' in report.redTeam) return 'not run';
  const exploits = report.redTeam.exploits;
  if (report.exploitable) return `EXPLOITABLE (${exploits.filter((e) => e.exploitable).length})`;
  const notRun = exploits.filter((e) => e.notRun).length;
  const inconclusive = exploits.filter((e) => e.inconclusive).length;
  return [`${exploits.length - notRun - inconclusive}/${exploits.length} resist`, notRun ? `${notRun} not run` : '', inconclusive ? `${inconclusive} inconclusive` : ''].filter(Boolean).join(', ');
}

function networkText(report: TaskCheckReport): string {
  const needs = report.offlineVerifier?.needsNetwork;
  return `${report.network.mode}${needs === true ? ', verifier needs it' : needs === false ? ', verifier offline ok' : ''}`;
}

/** start, oracle, red team: or, when its image could not be built, that instead. */
function verdicts(r: TaskCheckReport): string[] {
  if (r.environmentError) return ['no image', '-', '-'];
  return [caseVerdict(r.cases.find((c) => c.name === 'untouched start')), caseVerdict(r.cases.find((c) => c.name === 'reference solution')), redTeamVerdict(r)];
}

export function collectionTable(reports: TaskCheckReport[]): string {
  const rows = reports.map((r) => [
    r.taskId,
    ...verdicts(r),
    networkText(r),
    r.timings.build ? `${r.timings.build.seconds.toFixed(0)}${r.timings.build.cached ? ' (cached)' : ''}` : '-',
    r.timings.checkSeconds.toFixed(0),
    r.passed ? 'PASS' : r.needsInternet ? `NEEDS INTERNET (${r.needsInternet.hosts.join(', ')})` : 'FAIL',
  ]);
  const head = ['task', 'start', 'oracle', 'red team', 'network', 'build s', 'check s', 'check'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]): string => `${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd()}\n`;
  return `\n${line(head)}${line(widths.map((w) => '-'.repeat(w)))}${rows.map(line).join('')}`;
}
