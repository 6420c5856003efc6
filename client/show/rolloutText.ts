/** `rollout show` on a terminal: one rollout, turn by turn, as plain text. */
import type { AttemptView, RolloutView, VerifyView } from './rolloutView.js';
import { sizeLine } from './excerpt.js';
import { terminalSafe } from './terminalText.js';
import type { Section, ToolCallView, TurnView } from './turnView.js';
import { attemptTitle, durationText, headlineFacts, messageLabel, outcomeText, resumeFact, rewardText, stageTimings } from './viewFacts.js';

function indent(text: string, prefix: string): string {
  return text
    .split('\n')
    .map((l) => (l === '' ? prefix.trimEnd() : `${prefix}${l}`))
    .join('\n');
}

function sectionText(s: Section, prefix: string): string[] {
  const head = `${prefix}${sizeLine(s.label, s.excerpt)}${s.excerpt.bytes > 0 ? ':' : ''}`;
  return s.excerpt.bytes > 0 ? [head, indent(s.excerpt.text, `${prefix}  | `)] : [head];
}

function callText(c: ToolCallView): string[] {
  const lines = [`  → ${c.headline}`];
  for (const a of c.arguments) lines.push(...sectionText(a, '      '));
  if (c.result) {
    const r = c.result;
    const facts = [
      ...(r.malformed ? ['malformed call, not run'] : r.exitCode !== null ? [`exit ${r.exitCode}`] : []),
      r.malformed || r.exitCode !== null ? durationText(r.durationMs) : `took ${durationText(r.durationMs)}`,
      ...(r.timedOut ? ['timed out'] : []),
      ...(r.truncated ? ['output cut by the sandbox limit'] : []),
    ];
    lines.push(`    ${facts.join(' · ')}`);
    for (const s of r.sections) lines.push(...sectionText(s, '    '));
  } else if (c.note) lines.push(`    (${c.note})`);
  return lines;
}

function turnText(t: TurnView): string[] {
  const usage = t.usage ? ` · tokens ${Object.entries(t.usage).filter(([k]) => k.endsWith('_tokens')).map(([k, v]) => `${k.replace('_tokens', '')} ${v}`).join(', ')}` : '';
  const lines = [`turn ${t.turn} · policy ${t.model} · ${durationText(t.latencyMs)}${t.finishReason ? ` · finish ${t.finishReason}` : ''}${usage}`];
  if (t.restored) lines.push(`  ${t.restored}`);
  if (t.tokens) lines.push(`  ${t.tokens}`);
  if (t.reasoning) lines.push(...sectionText(t.reasoning, '  '));
  if (t.content) lines.push(...sectionText(t.content, '  '));
  if (!t.content && t.calls.length === 0) lines.push('  (empty message: no content, no tool call)');
  for (const c of t.calls) lines.push(...callText(c));
  return lines;
}

function verifyText(v: VerifyView): string[] {
  const facts = [
    `reward ${v.reward ?? 'none'}`,
    v.exitCode === null ? undefined : `test.sh exit ${v.exitCode}`,
    v.durationMs === null ? undefined : durationText(v.durationMs),
    v.source || undefined,
  ].filter((f) => f !== undefined);
  const metrics = Object.entries(v.metrics);
  return [
    `verifier (${v.mode}) · ${facts.join(' · ')}`,
    ...(metrics.length ? [`  metrics: ${metrics.map(([k, n]) => `${k}=${n}`).join(', ')}`] : []),
    ...sectionText(v.tail, '  '),
  ];
}

function attemptText(a: AttemptView, total: number): string[] {
  const lines = [`━━ ${attemptTitle(a, total)}`];
  const resume = resumeFact(a);
  if (resume) lines.push(resume);
  if (a.summary?.message) lines.push(`${messageLabel(a)}: ${a.summary.message}`);
  lines.push(`recorded: ${a.recorded}`);
  for (const t of a.turns) lines.push('', ...turnText(t));
  if (a.verify) lines.push('', ...verifyText(a.verify));
  else if (a.turns.length > 0 && !a.running) lines.push('', 'verifier: no result (the attempt ended before verification finished)');
  return lines;
}

export function rolloutText(view: RolloutView): string {
  const { state } = view;
  const lines = [
    `${state.workflowId} · ${state.status} · ${outcomeText(view)} · ${rewardText(view)}`,
    ...headlineFacts(view),
    ...(stageTimings(view) ? [`timings: ${stageTimings(view)}`] : []),
    `trajectory: ${view.storeLocation}`,
  ];
  if (view.storeWarning) lines.push(`warning: ${view.storeWarning}`);
  if (view.instruction) lines.push('', ...sectionText(view.instruction, ''));
  if (view.attempts.length === 0) lines.push('', 'no attempt has started yet');
  for (const a of view.attempts) lines.push('', ...attemptText(a, view.attempts.length));
  // Everything the agent wrote is in these lines; none of it reaches the terminal as a control sequence.
  return `${terminalSafe(lines.join('\n'))}\n`;
}
