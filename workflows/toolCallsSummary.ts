/**
 * The one-line summary the Temporal UI shows for a turn's tool calls run as one
 * activity (runTools): every call's own summary, in order.
 */
/** Longest summary shown for a turn's tool calls; the activity's input and result hold every call in full. */
const MAX_SUMMARY_CHARS = 400;

/** `turn 3: 2 tool calls: write_file: /a.sh · bash: bash /a.sh`, shortened with a count of the calls left out. */
export function toolCallsSummary(turn: number, summaries: string[]): string {
  const head = `turn ${turn}: ${summaries.length} tool calls: `;
  let text = head;
  for (const [i, s] of summaries.entries()) {
    const next = `${i === 0 ? '' : ' · '}${s}`;
    const rest = summaries.length - i;
    if (text.length + next.length > MAX_SUMMARY_CHARS - 20 && rest > 1) return `${text} · … (+${rest} more)`;
    text += next;
  }
  return text;
}
