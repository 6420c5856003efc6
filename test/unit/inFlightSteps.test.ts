/** A step asked for twice while its first run still goes runs once; a failed first run does not answer for the second. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { InFlightSteps } from '../../activities/inFlightSteps.js';

test('a second call of a running step waits for it and takes its result: the step runs once', async () => {
  const steps = new InFlightSteps();
  let runs = 0;
  const step = async (): Promise<string> => {
    runs++;
    await sleep(50);
    return `answer ${runs}`;
  };
  const [a, b] = await Promise.all([steps.run('ref/turn-000.policy', step), steps.run('ref/turn-000.policy', step)]);
  assert.deepEqual([a, b, runs], ['answer 1', 'answer 1', 1]);
  assert.equal(steps.size, 0, 'nothing left running');
  assert.equal(await steps.run('ref/turn-000.policy', step), 'answer 2', 'a later call runs the step again (the store answers for finished steps)');
});

test('other keys run side by side; a first run that failed is run again by the second caller', async () => {
  const steps = new InFlightSteps();
  let runs = 0;
  const failing = steps.run('k', async () => {
    runs++;
    await sleep(20);
    throw new Error('sandbox gone');
  });
  const second = steps.run('k', async () => {
    runs++;
    return 'ran itself';
  });
  const other = steps.run('other', async () => 'other key');
  await assert.rejects(failing, /sandbox gone/);
  assert.deepEqual([await second, await other, runs], ['ran itself', 'other key', 2]);
});
