/**
 * The text a bash tool call shows the policy: an exit-code line, then the
 * command's stdout and stderr, each under its own heading when not empty.
 * Written and read back here only, so the trajectory viewer can show the two
 * streams apart with their sizes.
 */
import type { ExecResult } from '../shared/sandbox.js';

const STDOUT = 'stdout:\n';
const STDERR = 'stderr:\n';

export function formatBashObservation(r: Pick<ExecResult, 'exitCode' | 'timedOut' | 'stdout' | 'stderr'>, timeoutSec: number): string {
  const parts = [`exit code: ${r.exitCode}${r.timedOut ? ` (killed: the command ran past ${timeoutSec} s)` : ''}`];
  if (r.stdout) parts.push(`${STDOUT}${r.stdout}`);
  if (r.stderr) parts.push(`${STDERR}${r.stderr}`);
  return parts.join('\n');
}

export interface BashStreams {
  /** The exit-code line, e.g. `exit code: 0` or `exit code: 137 (killed: ...)`. */
  status: string;
  stdout: string;
  stderr: string;
}

/**
 * Splits an observation made by formatBashObservation back into its streams;
 * undefined when the text is not one. A stdout that itself contains a line
 * `stderr:` is split at the last such line (the headings cannot tell it apart).
 */
export function parseBashObservation(text: string): BashStreams | undefined {
  const firstBreak = text.indexOf('\n');
  const status = firstBreak < 0 ? text : text.slice(0, firstBreak);
  if (!/^exit code: -?\d+/.test(status)) return undefined;
  let rest = firstBreak < 0 ? '' : text.slice(firstBreak + 1);
  let stdout = '';
  let stderr = '';
  if (rest.startsWith(STDERR)) return { status, stdout, stderr: rest.slice(STDERR.length) };
  if (!rest.startsWith(STDOUT)) return rest === '' ? { status, stdout, stderr } : undefined;
  rest = rest.slice(STDOUT.length);
  const split = rest.lastIndexOf(`\n${STDERR}`);
  if (split < 0) stdout = rest;
  else {
    stdout = rest.slice(0, split);
    stderr = rest.slice(split + 1 + STDERR.length);
  }
  return { status, stdout, stderr };
}
