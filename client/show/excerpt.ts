/**
 * How much of a long text the viewer shows: its size in bytes and lines, and
 * the first or last lines of it ("stdout 12.3 KiB, 40 lines, showing last 20").
 * Tails for command output (errors come last), heads for files and arguments.
 */

export interface Excerpt {
  /** The lines shown, joined; each line cut at MAX_LINE_CHARS. */
  text: string;
  bytes: number;
  lines: number;
  shownLines: number;
  from: 'head' | 'tail';
  /** True when the shown text is all of it (no line left out, none cut). */
  complete: boolean;
}

const MAX_LINE_CHARS = 400;

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

/** The text's lines; a trailing newline does not make an extra empty line. */
function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

function cutLine(line: string): string {
  return line.length <= MAX_LINE_CHARS ? line : `${line.slice(0, MAX_LINE_CHARS)}… (${line.length - MAX_LINE_CHARS} more characters)`;
}

export function excerpt(text: string, maxLines: number, from: 'head' | 'tail'): Excerpt {
  const lines = splitLines(text);
  const shown = lines.length <= maxLines ? lines : from === 'head' ? lines.slice(0, maxLines) : lines.slice(-maxLines);
  const complete = shown.length === lines.length && shown.every((l) => l.length <= MAX_LINE_CHARS);
  return { text: shown.map(cutLine).join('\n'), bytes: Buffer.byteLength(text), lines: lines.length, shownLines: shown.length, from, complete };
}

/** `stdout 12.3 KiB, 40 lines, showing last 20`, `stdout 12 B, 1 line`, `stdout empty`. */
export function sizeLine(label: string, e: Excerpt): string {
  if (e.bytes === 0) return `${label} empty`;
  const size = `${label} ${formatBytes(e.bytes)}, ${e.lines} line${e.lines === 1 ? '' : 's'}`;
  return e.shownLines < e.lines ? `${size}, showing ${e.from === 'head' ? 'first' : 'last'} ${e.shownLines}` : size;
}

