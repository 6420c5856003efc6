/**
 * Text for a terminal: control characters the agent printed (an escape
 * sequence that recolours, clears or retitles the terminal, a carriage return
 * that overwrites the line) are shown as `\xNN`, never sent to the terminal.
 * Newlines and tabs stay.
 */
export function terminalSafe(text: string): string {
  return text.replace(/[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}
