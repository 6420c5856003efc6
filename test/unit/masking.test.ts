/** The guard on masking: group and batch fractions by class and type, and the batch flag. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchMasked, maskedSummary } from '../../shared/masking.js';

const r = (valid: boolean, outcomeClass: 'ok' | 'infra' | 'model', outcomeType: string) => ({ valid, outcomeClass, outcomeType });

test('a group counts its masked rollouts by class and by class/type', () => {
  const m = maskedSummary([r(true, 'ok', 'submitted'), r(false, 'infra', 'sandbox_lost'), r(false, 'infra', 'provision_failed'), r(false, 'infra', 'sandbox_lost'), r(true, 'model', 'verifier_blocked')]);
  assert.deepEqual(m, { count: 3, fraction: 0.6, byClass: { infra: 3 }, byType: { 'infra/sandbox_lost': 2, 'infra/provision_failed': 1 } });
  assert.deepEqual(maskedSummary([]), { count: 0, fraction: 0, byClass: {}, byType: {} });
});

test('a batch past the strictest maxMaskedFraction of its groups is flagged; results without a summary are recomputed', () => {
  const masked = [r(false, 'infra', 'sandbox_lost'), r(false, 'infra', 'sandbox_lost')];
  const ok = [r(true, 'ok', 'submitted'), r(true, 'ok', 'submitted')];
  const groupA = { rollouts: masked, masked: { ...maskedSummary(masked), maxFraction: 0.4 } };
  const groupB = { rollouts: ok, masked: undefined };
  const batch = batchMasked([groupA, groupB] as unknown as Parameters<typeof batchMasked>[0]);
  assert.equal(batch.masked.fraction, 0.5);
  assert.equal(batch.maxFraction, 0.4);
  assert.equal(batch.flagged, true);
  assert.equal(batch.line, 'masked 2 of 4 (50%): infra/sandbox_lost 2: FLAGGED, more than maxMaskedFraction 0.4 of the batch is masked');
  const calm = batchMasked([groupB] as unknown as Parameters<typeof batchMasked>[0]);
  assert.deepEqual([calm.flagged, calm.line], [false, 'masked 0 of 2 (0%)']);
});
