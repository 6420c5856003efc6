/**
 * `rollout report --html`: one self-contained page (inline SVG, no scripts, no
 * external assets) with stage-time histograms, mean reward per task, the
 * outcome breakdown, what was masked (flagged past the guard) and every
 * rollout, linked to its own page when given.
 */
import { PAGE_CSP } from '../show/escapeHtml.js';
import { STAGES, type BatchReport, type RolloutRow } from './batchReport.js';

export interface ReportHtmlOptions {
  /** Where each rollout's own page is, relative to the report (rollout show --html pages). */
  rolloutHref?: (workflowId: string) => string | undefined;
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const CLASS_COLOURS: Record<string, string> = { ok: '#2e7d32', model: '#f9a825', infra: '#c62828', task: '#6a1b9a' };

function histogram(title: string, samples: number[], bins = 12): string {
  const width = 320;
  const height = 160;
  const pad = 28;
  if (samples.length === 0) return `<figure><figcaption>${esc(title)}</figcaption><p>no samples</p></figure>`;
  const min = Math.min(...samples);
  const max = Math.max(...samples);
  const span = max - min || 1;
  const counts = Array.from({ length: bins }, () => 0);
  for (const s of samples) counts[Math.min(bins - 1, Math.floor(((s - min) / span) * bins))]! += 1;
  const top = Math.max(...counts);
  const barWidth = (width - 2 * pad) / bins;
  const bars = counts
    .map((c, i) => {
      const h = (c / top) * (height - 2 * pad);
      return `<rect x="${(pad + i * barWidth).toFixed(1)}" y="${(height - pad - h).toFixed(1)}" width="${(barWidth - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="#1565c0"><title>${c} rollouts</title></rect>`;
    })
    .join('');
  return `<figure><figcaption>${esc(title)}</figcaption><svg role="img" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">${bars}
<line x1="${pad}" y1="${height - pad}" x2="${width - pad}" y2="${height - pad}" stroke="#555"/>
<text x="${pad}" y="${height - 8}" font-size="11">${min.toFixed(0)} ms</text><text x="${width - pad}" y="${height - 8}" font-size="11" text-anchor="end">${max.toFixed(0)} ms</text>
<text x="${pad}" y="14" font-size="11">max ${top} per bin</text></svg></figure>`;
}

function horizontalBars(title: string, rows: { label: string; value: number; colour: string; note: string }[], maxValue: number): string {
  const rowHeight = 24;
  const labelWidth = 230;
  const barMax = 300;
  const height = rows.length * rowHeight + 10;
  const body = rows
    .map((r, i) => {
      const y = 5 + i * rowHeight;
      const w = maxValue > 0 ? (r.value / maxValue) * barMax : 0;
      return `<text x="0" y="${y + 16}" font-size="12">${esc(r.label)}</text><rect x="${labelWidth}" y="${y + 4}" width="${w.toFixed(1)}" height="16" fill="${r.colour}"/><text x="${labelWidth + w + 6}" y="${y + 16}" font-size="12">${esc(r.note)}</text>`;
    })
    .join('');
  return `<figure><figcaption>${esc(title)}</figcaption><svg role="img" width="${labelWidth + barMax + 120}" height="${height}">${body}</svg></figure>`;
}

function rolloutTable(rows: RolloutRow[], href: ReportHtmlOptions['rolloutHref']): string {
  const fmt = (n: number | null, digits: number): string => (n === null ? '-' : n.toFixed(digits));
  const body = rows
    .map((r) => {
      const link = href?.(r.workflowId);
      const id = link !== undefined ? `<a href="${esc(link)}">${esc(r.workflowId)}</a>` : esc(r.workflowId);
      const outcome = `<span style="color:${CLASS_COLOURS[r.outcomeClass] ?? '#555'}">${esc(`${r.outcomeClass}/${r.outcomeType}`)}</span>`;
      return `<tr><td>${id}</td><td>${fmt(r.reward, 2)}</td><td>${fmt(r.advantage, 3)}</td><td>${r.valid ? 'yes' : 'no'}</td><td>${outcome}</td><td>${r.attempts}</td><td>${r.turns}</td></tr>`;
    })
    .join('');
  return `<table class="rollouts"><tr><th>rollout</th><th>reward</th><th>advantage</th><th>valid</th><th>outcome</th><th>attempts</th><th>turns</th></tr>${body}</table>`;
}

export function reportHtml(report: BatchReport, options: ReportHtmlOptions = {}): string {
  const stageFigures = STAGES.map((stage) => {
    const s = report.stages[stage];
    return histogram(`${stage.replace('Ms', '')} — p50 ${s.p50.toFixed(0)} ms, p95 ${s.p95.toFixed(0)} ms`, s.samples);
  }).join('\n');
  const rewards = horizontalBars(
    'Mean reward per task (valid rollouts)',
    report.tasks.map((t) => ({
      label: `${t.taskId} (${t.valid}/${t.n})`,
      value: t.mean ?? 0,
      colour: t.status === 'complete' ? '#2e7d32' : '#c62828',
      note: t.mean === null ? `no valid rollouts (${t.status})` : `${t.mean.toFixed(2)} ± ${(t.std ?? 0).toFixed(2)}${t.status === 'complete' ? '' : ` (${t.status})`}`,
    })),
    1,
  );
  const outcomes = horizontalBars(
    'Outcomes by class and type',
    report.outcomes.map((o) => ({ label: `${o.outcomeClass}/${o.outcomeType}`, value: o.count, colour: CLASS_COLOURS[o.outcomeClass] ?? '#555', note: String(o.count) })),
    Math.max(1, ...report.outcomes.map((o) => o.count)),
  );
  const taskRows = report.tasks
    .map(
      (t) =>
        `<tr><td>${esc(t.taskId)}</td><td>${esc(t.status)}</td><td>${t.valid}/${t.n}</td><td>${Math.round(t.masked.fraction * 100)}%</td><td>${t.mean?.toFixed(2) ?? '-'}</td><td>${t.std?.toFixed(2) ?? '-'}</td><td>${esc(t.histogram.map(([v, c]) => `${v}×${c}`).join(' '))}</td></tr>`,
    )
    .join('');
  const batchMask = report.masked;
  const maskedTypes = Object.entries(batchMask.masked.byType).sort((a, b) => b[1] - a[1]);
  const masked = horizontalBars(
    `Masked: ${Math.round(batchMask.masked.fraction * 100)}% of the batch (guard: maxMaskedFraction ${batchMask.maxFraction})`,
    maskedTypes.map(([type, n]) => ({
      label: type,
      value: n,
      colour: CLASS_COLOURS[type.slice(0, type.indexOf('/'))] ?? '#555',
      note: `${n} (${Math.round((n / Math.max(1, report.rollouts)) * 100)}%)`,
    })),
    Math.max(1, ...maskedTypes.map(([, n]) => n)),
  );
  const maskedFlag = batchMask.flagged ? `<p class="flag" role="alert"><strong>Flagged:</strong> ${esc(batchMask.line)}</p>` : `<p>${esc(batchMask.line)}</p>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="${PAGE_CSP}"><title>rollout report ${esc(report.batchId)}</title>
<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}figure{display:inline-block;margin:8px 16px 16px 0;vertical-align:top}figcaption{font-weight:600;margin-bottom:4px}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}.flag{background:#fdecea;border:1px solid #c62828;padding:8px}</style>
</head><body>
<h1>Batch ${esc(report.batchId)}</h1>
<p>${report.groups} groups, ${report.rollouts} rollouts.</p>
<h2>Stage times</h2>
${stageFigures}
<h2>Rewards</h2>
${rewards}
<table><tr><th>task</th><th>status</th><th>valid</th><th>masked</th><th>mean</th><th>std</th><th>rewards (value×count)</th></tr>${taskRows}</table>
<h2>Outcomes</h2>
${outcomes}
<h2>Masked (left out of the baseline)</h2>
${maskedFlag}
${maskedTypes.length > 0 ? masked : ''}
<h2>Rollouts</h2>
${options.rolloutHref ? '<p>Each rollout links to its page: turns, tool outputs, verifier output, every attempt.</p>' : ''}
${rolloutTable(report.rolloutRows, options.rolloutHref)}
</body></html>
`;
}
