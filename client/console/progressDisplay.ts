/**
 * Writes batch progress to a stream. On a TTY the group lines and the batch
 * line are redrawn in place; elsewhere (a file, a pipe, CI) a group's line is
 * printed once when it finishes and the batch line every `plainEveryMs`.
 */
import type { GroupState } from './groupState.js';
import { batchLine, groupLines } from './progressLines.js';

export interface ProgressDisplay {
  show(groups: readonly GroupState[]): void;
  /** The last state drawn for good (on a TTY the block stays on screen, the cursor below it). */
  finish(groups: readonly GroupState[]): void;
}

export interface DisplayOptions {
  batchId: string;
  stream: NodeJS.WriteStream;
  /** Without a TTY, how often the batch line is printed (default 5 s). */
  plainEveryMs?: number;
  now?: () => number;
}

/** Group lines for a screen of `room` lines: when they do not all fit, unfinished groups first, then a count of the rest. */
export function groupLinesThatFit(groups: readonly GroupState[], room: number): string[] {
  if (groups.length <= room) return groupLines(groups);
  const order = [...groups.filter((g) => !g.closed), ...groups.filter((g) => g.closed)];
  const shown = order.slice(0, Math.max(1, room - 1));
  const hidden = order.slice(shown.length);
  return [...groupLines(shown), `  … ${hidden.length} more groups (${hidden.filter((g) => g.closed).length} finished)`];
}

export function progressDisplay(options: DisplayOptions): ProgressDisplay {
  const { batchId, stream } = options;
  const now = options.now ?? Date.now;
  const started = now();
  if (stream.isTTY) {
    let drawn = 0;
    const draw = (groups: readonly GroupState[]): void => {
      const columns = stream.columns || 120;
      const lines = [...groupLinesThatFit(groups, (stream.rows || 40) - 2), batchLine(batchId, groups, now() - started)].map((l) => (l.length > columns - 1 ? `${l.slice(0, columns - 2)}…` : l));
      // Back to the first line of the previous block, each line cleared and rewritten, the rest of the screen cleared.
      stream.write(`${drawn ? `\x1b[${drawn}F` : ''}${lines.map((l) => `\x1b[2K${l}`).join('\n')}\n\x1b[J`);
      drawn = lines.length;
    };
    return {
      show: draw,
      finish: (groups) => {
        draw(groups);
        stream.write('\n');
      },
    };
  }
  const every = options.plainEveryMs ?? 5000;
  let lastBatchLine = -Infinity;
  let lastLine = '';
  const reported = new Set<string>();
  const plain = (groups: readonly GroupState[], force: boolean): void => {
    const lines = groupLines(groups);
    groups.forEach((g, i) => {
      if (g.closed && !reported.has(g.taskId)) {
        reported.add(g.taskId);
        stream.write(`${lines[i]!.trimStart()}\n`);
      }
    });
    const line = batchLine(batchId, groups, now() - started);
    if ((force && line !== lastLine) || now() - lastBatchLine >= every) {
      lastBatchLine = now();
      lastLine = line;
      stream.write(`${line}\n`);
    }
  };
  return {
    show: (groups) => plain(groups, false),
    finish: (groups) => {
      plain(groups, true);
      stream.write('\n');
    },
  };
}
