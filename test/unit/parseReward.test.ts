/** Rewards as tests/test.sh writes them; anything unreadable is a verifier crash (infra), never 0. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseRewardJson, parseRewardTxt } from '../../verifier/parseReward.js';

const crashed = (err: Error): boolean => err.name === 'infra/verifier_crashed';

test('reward.txt holds one number', () => {
  assert.equal(parseRewardTxt('1\n').reward, 1);
  assert.equal(parseRewardTxt(' 0.25 ').reward, 0.25);
  assert.throws(() => parseRewardTxt(''), crashed);
  assert.throws(() => parseRewardTxt('PASSED'), (err: Error) => crashed(err) && /"PASSED", not a number/.test(err.message));
  assert.throws(() => parseRewardTxt('NaN'), crashed);
});

test('reward.json holds {"reward": n} plus metrics, or a single number', () => {
  assert.deepEqual(parseRewardJson('{"reward": 0.5, "tests_passed": 3, "note": "x"}'), {
    reward: 0.5,
    metrics: { reward: 0.5, tests_passed: 3 },
    source: 'reward.json',
  });
  assert.equal(parseRewardJson('{"accuracy": 1}').reward, 1);
  assert.equal(parseRewardJson('0').reward, 0);
  assert.throws(() => parseRewardJson('{"a": 1, "b": 0}'), (err: Error) => crashed(err) && /none is "reward"/.test(err.message));
  assert.throws(() => parseRewardJson('{}'), (err: Error) => crashed(err) && /empty object/.test(err.message));
  assert.throws(() => parseRewardJson(''), crashed);
  assert.throws(() => parseRewardJson('not json'), crashed);
  assert.throws(() => parseRewardJson('[1]'), crashed);
});
