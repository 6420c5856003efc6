/**
 * The test runner's scheduler (test/runner/scheduler.ts): longest first, within the core budget, no two
 * files on a lock held alone, sharers together, a file waiting to hold a lock alone not starved by
 * sharers behind it, and a file that needs the machine alone run last and by itself.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { longestFirst, pickStartable, type ScheduledFile } from '../runner/scheduler.js';
import { parseBashTimes, parseTapCounts } from '../runner/fileRun.js';
import { scheduledFile } from '../runner/schedule.js';

const file = (name: string, o: Partial<ScheduledFile> = {}): ScheduledFile => ({ file: name, expectedS: 10, weight: 0.5, locks: [], shares: [], alone: false, ...o });
const names = (fs: ScheduledFile[]): string[] => fs.map((f) => f.file);
const limits = { weightBudget: 2, maxFiles: 4 };

test('longest first; files that need the machine alone last', () => {
  const order = longestFirst([file('a', { expectedS: 5 }), file('b', { expectedS: 50, alone: true }), file('c', { expectedS: 20 })]);
  assert.deepEqual(names(order), ['c', 'a', 'b']);
});

test("files on a lock held alone rank by the whole chain's length: the CPU-heavy suites start first", () => {
  const order = longestFirst([file('long', { expectedS: 300 }), file('m1', { expectedS: 200, locks: ['cpu-heavy'] }), file('m2', { expectedS: 150, locks: ['cpu-heavy'] })]);
  assert.deepEqual(names(order), ['m1', 'm2', 'long']);
});

test('starts files while their weights fit the budget and the file count; one always runs', () => {
  assert.deepEqual(names(pickStartable([file('a', { weight: 1 }), file('b', { weight: 1 }), file('c', { weight: 0.5 })], [], limits)), ['a', 'b']);
  assert.deepEqual(names(pickStartable([file('heavy', { weight: 3 })], [], limits)), ['heavy'], 'heavier than the budget still runs, alone');
  assert.deepEqual(names(pickStartable([file('x', { weight: 0.1 })], [1, 2, 3, 4].map((i) => file(`r${i}`, { weight: 0.1 })), limits)), []);
});

test('a file that does not fit keeps its room: lighter files behind it cannot starve it', () => {
  const running = [file('trainer', { weight: 1.8 })];
  const waiting = [file('image', { weight: 1.4 }), file('l1', { weight: 0.3 }), file('l2', { weight: 0.3 })];
  assert.deepEqual(names(pickStartable(waiting, running, { weightBudget: 3, maxFiles: 6 })), [], 'image does not fit (3.2 > 3), and l1 would take its room');
  assert.deepEqual(names(pickStartable(waiting, [file('trainer', { weight: 1.8 })], { weightBudget: 3.5, maxFiles: 6 })), ['image', 'l1']);
});

test('a lock held alone keeps every other holder or sharer out; sharers run together', () => {
  const heavy = (n: string) => file(n, { locks: ['cpu-heavy'] });
  assert.deepEqual(names(pickStartable([heavy('m1'), heavy('m2'), file('light')], [], limits)), ['m1', 'light']);
  const sharer = (n: string) => file(n, { shares: ['loop-sweep'] });
  assert.deepEqual(names(pickStartable([sharer('s1'), sharer('s2')], [], limits)), ['s1', 's2']);
  assert.deepEqual(names(pickStartable([file('gc', { locks: ['loop-sweep'] }), sharer('s3')], [sharer('s1')], limits)), [], 'the sweep-holder waits, and the sharer behind it does not jump ahead');
  assert.deepEqual(names(pickStartable([file('gc', { locks: ['loop-sweep'] })], [], limits)), ['gc']);
});

test('a file that needs the machine alone starts only on an idle machine, and nothing beside it', () => {
  const alone = file('alone', { alone: true });
  assert.deepEqual(names(pickStartable([alone], [file('r')], limits)), []);
  assert.deepEqual(names(pickStartable([alone, file('later')], [], limits)), ['alone']);
  assert.deepEqual(names(pickStartable([file('x')], [alone], limits)), []);
});

test("the measurements come from node's TAP summary and bash's `times`", () => {
  assert.deepEqual(parseTapCounts('ok 1\n# tests 5\n# suites 1\n# pass 3\n# fail 1\n# cancelled 0\n# skipped 1\n# todo 0\n'), { tests: 5, pass: 3, fail: 1, skipped: 1, todo: 0, cancelled: 0 });
  assert.equal(parseBashTimes('0m0.010s 0m0.005s\n1m2.500s 0m0.500s\n'), 63);
});

test('a file is stopped past four times its last measured time, within 25 and 45 minutes', () => {
  assert.equal(scheduledFile('test/unit/short.test.ts', { wallS: 30, cpuS: 10, at: '' }).limitS, 25 * 60);
  assert.equal(scheduledFile('test/faults/faultSuite.test.ts', { wallS: 507, cpuS: 120, at: '' }).limitS, 4 * 507, 'the fault suite, 507 s here, has 34 minutes on a machine three times slower');
  assert.equal(scheduledFile('test/integration/trainInferenceMismatch.test.ts', { wallS: 1274, cpuS: 901, at: '' }).limitS, 45 * 60);
});
