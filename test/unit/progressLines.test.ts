/** What `rollout run` and `rollout status --watch` show while a batch runs, from the states of its groups. */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { stateFromProgress, type GroupState } from '../../client/console/groupState.js';
import { groupLinesThatFit, progressDisplay } from '../../client/console/progressDisplay.js';
import { batchLine, groupLines } from '../../client/console/progressLines.js';

// What the progress query returns once it went through JSON: unfinished rollouts are null, like failed ones.
const running = stateFromProgress('fix-median', 4, { total: 4, finished: 3, rewards: [1, null, null, 0] });
const done: GroupState = { taskId: 'write-greeting', status: 'complete', groupSize: 4, finished: 4, rewards: [1, 0, null, 1], closed: true };
const queued = stateFromProgress('ini-to-json', 4, undefined);

test('a running group counts finished rollouts without a reward as failed, the rest as running', () => {
  assert.deepEqual(running.rewards, [1, 0, null, undefined]);
  assert.deepEqual(groupLines([running, done, queued]), [
    '  fix-median      running       3/4 done, 1 running, 1 failed  rewards 1 0 x ·',
    '  write-greeting  complete      4/4 done, 1 failed            rewards 1 0 x 1',
    '  ini-to-json     queued        0/4 done, 4 running           rewards · · · ·',
  ]);
});

test('the batch line totals the groups and estimates the rest from the rate so far', () => {
  assert.equal(batchLine('b1', [running, done, queued], 14_000), 'batch b1: 7/12 rollouts done, 5 running, 2 failed · 1/3 groups finished · 14s elapsed, ETA 10s');
  assert.equal(batchLine('b1', [queued], 3_000), 'batch b1: 0/4 rollouts done, 4 running, 0 failed · 0/1 groups finished · 3s elapsed, ETA after the first rollout');
  assert.equal(batchLine('b1', [done], 75_000), 'batch b1: 4/4 rollouts done, 0 running, 1 failed · 1/1 groups finished · 1m15s elapsed, finished');
});

function stream(isTTY: boolean): { out: NodeJS.WriteStream; text: () => string } {
  const s = new PassThrough();
  let text = '';
  s.on('data', (d: Buffer) => (text += d.toString()));
  return { out: Object.assign(s, { isTTY, columns: 100 }) as unknown as NodeJS.WriteStream, text: () => text };
}

test('on a TTY the block is redrawn in place: cursor back up over the previous lines, each line cleared', () => {
  const { out, text } = stream(true);
  const display = progressDisplay({ batchId: 'b1', stream: out, now: () => 0 });
  display.show([running]);
  display.show([{ ...running, finished: 4, rewards: [1, 0, null, 1] }]);
  const [first, second] = text().split('\x1b[2F');
  assert.equal(first, '\x1b[2K  fix-median  running       3/4 done, 1 running, 1 failed  rewards 1 0 x ·\n\x1b[2Kbatch b1: 3/4 rollouts done, 1 running, 1 failed · 0/1 groups finished · 0s elapsed, ETA 0s\n\x1b[J');
  assert.match(second!, /^\x1b\[2K  fix-median  running +4\/4 done, 1 failed +rewards 1 0 x 1\n/);
});

test('without a TTY a finished group is printed once and the batch line at most every few seconds', () => {
  const { out, text } = stream(false);
  let now = 0;
  const display = progressDisplay({ batchId: 'b1', stream: out, plainEveryMs: 5000, now: () => now });
  display.show([running, queued]);
  now = 1000;
  display.show([running, queued]);
  now = 6000;
  display.show([done, queued]);
  display.finish([done, queued]);
  assert.deepEqual(text().split('\n'), [
    'batch b1: 3/8 rollouts done, 5 running, 1 failed · 0/2 groups finished · 0s elapsed, ETA 0s',
    'write-greeting  complete      4/4 done, 1 failed            rewards 1 0 x 1',
    'batch b1: 4/8 rollouts done, 4 running, 1 failed · 1/2 groups finished · 6s elapsed, ETA 6s',
    '',
    '',
  ]);
});

test('more groups than the screen has lines: the unfinished ones first, then a count of the rest', () => {
  const lines = groupLinesThatFit([done, running, { ...done, taskId: 'ini-to-json' }, queued], 3);
  assert.deepEqual(lines.map((l) => l.trim().split(/ +/)[0]), ['fix-median', 'ini-to-json', '…']);
  assert.equal(lines.at(-1), '  … 2 more groups (2 finished)');
  assert.equal(groupLinesThatFit([done, running], 3).length, 2, 'all of them when they fit');
});
