/**
 * `rollout show --html`: the same as the text, as one self-contained page (an
 * inline style sheet, no script, no external asset, a CSP that forbids both).
 * Everything the agent, the model or the task wrote is escaped.
 */
import { escapeHtml as esc, PAGE_CSP } from './escapeHtml.js';
import { formatBytes, sizeLine } from './excerpt.js';
import { PAGE_STYLE } from './pageStyle.js';
import type { AttemptView, RolloutView, VerifyView } from './rolloutView.js';
import type { Section, ToolCallView, TurnView } from './turnView.js';
import { attemptTitle, durationText, headlineFacts, messageLabel, outcomeText, resumeFact, rewardText, stageTimings } from './viewFacts.js';

export interface PageOptions {
  /** A link back to the page that lists this rollout (the batch report). */
  back?: { href: string; label: string };
}

const classOf = (outcomeClass: string | undefined): string => (outcomeClass && /^(ok|model|infra|task|running)$/.test(outcomeClass) ? `c-${outcomeClass}` : '');

function sectionHtml(s: Section, cls = ''): string {
  const label = `<div class="label">${esc(sizeLine(s.label, s.excerpt))}</div>`;
  if (s.excerpt.bytes === 0) return label;
  const shown = `<pre class="${cls}">${esc(s.excerpt.text)}</pre>`;
  const all = s.excerpt.complete ? '' : `<details><summary>show all of ${esc(s.label)} (${s.excerpt.lines} lines, ${formatBytes(s.excerpt.bytes)})</summary><pre>${esc(s.full)}</pre></details>`;
  return `${label}${shown}${all}`;
}

function callHtml(c: ToolCallView): string {
  const parts = [`<div class="call" data-tool="${esc(c.name)}"><div class="call-head">${esc(c.headline)}</div>`];
  for (const a of c.arguments) parts.push(sectionHtml(a));
  if (c.result) {
    const r = c.result;
    const exit = r.malformed ? ['<span class="bad">malformed call, not run</span>'] : r.exitCode === null ? [] : [r.exitCode === 0 ? 'exit 0' : `<span class="bad">exit ${r.exitCode}</span>`];
    const facts = [
      ...exit,
      esc(exit.length ? durationText(r.durationMs) : `took ${durationText(r.durationMs)}`),
      ...(r.timedOut ? ['<span class="bad">timed out</span>'] : []),
      ...(r.truncated ? ['output cut by the sandbox limit'] : []),
    ];
    parts.push(`<div class="call-meta">${facts.join(' · ')}</div>`);
    for (const s of r.sections) parts.push(sectionHtml(s));
  } else if (c.note) parts.push(`<div class="note">${esc(c.note)}</div>`);
  parts.push('</div>');
  return parts.join('');
}

function turnHtml(t: TurnView): string {
  const usage = t.usage ? ` · tokens ${Object.entries(t.usage).filter(([k]) => k.endsWith('_tokens')).map(([k, v]) => `${k.replace('_tokens', '')} ${v}`).join(', ')}` : '';
  const meta = `policy ${t.model} · ${durationText(t.latencyMs)}${t.finishReason ? ` · finish ${t.finishReason}` : ''}${usage}`;
  const parts = [`<article class="turn" id="t${t.turn}"><div class="turn-head">Turn ${t.turn}<span class="meta">${esc(meta)}</span></div>`];
  if (t.restored) parts.push(`<div class="facts">${esc(t.restored)}</div>`);
  if (t.tokens) parts.push(`<div class="facts">${esc(t.tokens)}</div>`);
  if (t.reasoning)
    parts.push(
      `<div class="reasoning"><b>reasoning</b>\n${esc(t.reasoning.excerpt.text)}</div>${t.reasoning.excerpt.complete ? '' : `<details><summary>all of the reasoning (${t.reasoning.excerpt.lines} lines)</summary><pre>${esc(t.reasoning.full)}</pre></details>`}`,
    );
  if (t.content)
    parts.push(
      `<div class="message">${esc(t.content.excerpt.text)}</div>${t.content.excerpt.complete ? '' : `<details><summary>the whole message (${t.content.excerpt.lines} lines)</summary><pre>${esc(t.content.full)}</pre></details>`}`,
    );
  if (!t.content && t.calls.length === 0) parts.push('<div class="note">empty message: no content, no tool call</div>');
  for (const c of t.calls) parts.push(callHtml(c));
  parts.push('</article>');
  return parts.join('');
}

function verifyHtml(v: VerifyView): string {
  const facts = [
    `reward ${v.reward ?? 'none'}`,
    v.exitCode === null ? undefined : `test.sh exit ${v.exitCode}`,
    v.durationMs === null ? undefined : durationText(v.durationMs),
    v.source || undefined,
  ].filter((f) => f !== undefined);
  const metrics = Object.entries(v.metrics);
  return `<div class="verify"><div class="turn-head">Verifier (${esc(v.mode)})<span class="meta">${esc(facts.join(' · '))}</span></div>${metrics.length ? `<div class="facts">metrics: ${esc(metrics.map(([k, n]) => `${k}=${n}`).join(', '))}</div>` : ''}${sectionHtml(v.tail)}</div>`;
}

function attemptHtml(a: AttemptView, total: number): string {
  const cls = a.running ? 'c-running' : classOf(a.summary?.outcomeClass);
  const parts = [`<section class="attempt ${cls}" id="attempt-${a.attempt + 1}"><div class="attempt-head"><h2>${esc(attemptTitle(a, total))}</h2></div><div class="attempt-body">`];
  const resume = resumeFact(a);
  if (resume) parts.push(`<div class="facts">${esc(resume)}</div>`);
  if (a.summary?.message) parts.push(`<div class="evidence ${cls}"><b>${messageLabel(a)}:</b> ${esc(a.summary.message)}</div>`);
  parts.push(`<div class="recorded">recorded: ${esc(a.recorded)}${a.startedAt ? ` · started ${esc(a.startedAt)}` : ''}</div>`);
  for (const t of a.turns) parts.push(turnHtml(t));
  if (a.verify) parts.push(verifyHtml(a.verify));
  else if (a.turns.length > 0 && !a.running) parts.push('<div class="note">verifier: no result (the attempt ended before verification finished)</div>');
  parts.push('</div></section>');
  return parts.join('');
}

export function rolloutHtml(view: RolloutView, options: PageOptions = {}): string {
  const { state } = view;
  const outcomeClass = state.result?.outcomeClass ?? (state.status === 'running' ? 'running' : undefined);
  const timings = stageTimings(view);
  const body = [
    options.back ? `<p><a href="${esc(options.back.href)}">← ${esc(options.back.label)}</a></p>` : '',
    `<header class="rollout"><h1>${esc(state.workflowId)}</h1>`,
    `<div class="badges"><span class="badge reward">${esc(rewardText(view))}</span><span class="badge ${classOf(outcomeClass)}">${esc(outcomeText(view))}</span><span class="badge">${esc(state.status)}</span></div>`,
    ...headlineFacts(view).map((l) => `<p class="facts">${esc(l)}</p>`),
    timings ? `<p class="facts">timings: ${esc(timings)}</p>` : '',
    `<p class="facts">trajectory: ${esc(view.storeLocation)}</p>`,
    view.storeWarning ? `<div class="evidence">${esc(view.storeWarning)}</div>` : '',
    view.instruction
      ? `<details class="instruction"><summary>${esc(sizeLine('instruction', view.instruction.excerpt))}</summary><pre>${esc(view.instruction.full)}</pre></details>`
      : '',
    '</header>',
    view.attempts.length === 0 ? '<p class="note">no attempt has started yet</p>' : '',
    ...view.attempts.map((a) => attemptHtml(a, view.attempts.length)),
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="${PAGE_CSP}"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${esc(`${state.workflowId} · ${outcomeText(view)} · ${rewardText(view)}`)}</title>
<style>${PAGE_STYLE}</style>
</head><body><main>
${body.filter((s) => s !== '').join('\n')}
</main></body></html>
`;
}
