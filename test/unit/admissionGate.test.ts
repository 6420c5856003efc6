/**
 * Admission by the inference server's load (policies/admission/): the gate's decisions
 * against readings a test sets, and the readings parsed from the servers' own metrics text.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AdmissionGate, type AdmissionSettings } from '../../policies/admission/admissionGate.js';
import { describeLoad, prometheusSums, type InferenceLoad } from '../../policies/admission/inferenceLoad.js';

const settings: AdmissionSettings = { mode: 'load', kvHigh: 0.8, kvLow: 0.6, maxWaitMs: 10_000 };
const load = (over: Partial<InferenceLoad>): InferenceLoad => ({ kind: 'vllm', running: 0, waiting: 0, slots: null, kvCacheUsage: null, sources: ['/metrics'], ...over });

/** A gate whose server reports what `now` holds when it is read. */
function gateReading(initial: InferenceLoad | null): { gate: AdmissionGate; set: (l: InferenceLoad | null) => void } {
  let now = initial;
  return { gate: new AdmissionGate('http://server', 'vllm', () => Promise.resolve(now)), set: (l) => (now = l) };
}

test('a server that reports no load is not gated', async () => {
  const { gate } = gateReading(null);
  const a = await gate.admit(settings);
  assert.deepEqual([a.waitedMs < 50, a.load, a.heldBy], [true, null, undefined]);
  assert.equal(gate.inFlight, 1);
  assert.equal(gate.release(), 0);
});

test('llama.cpp slots: no more calls than idle slots; the next goes when a slot frees, with the wait and its reason', async () => {
  const { gate, set } = gateReading(load({ kind: 'llama.cpp', slots: { busy: 1, total: 2 }, running: 1 }));
  const first = await gate.admit(settings);
  assert.equal(first.heldBy, undefined);
  set(load({ kind: 'llama.cpp', slots: { busy: 2, total: 2 }, running: 2 }));
  await new Promise((r) => setTimeout(r, 300));
  const second = gate.admit(settings);
  await new Promise((r) => setTimeout(r, 600));
  set(load({ kind: 'llama.cpp', slots: { busy: 1, total: 2 }, running: 1 }));
  const admitted = await second;
  assert.ok(admitted.waitedMs >= 500, `waited ${admitted.waitedMs} ms`);
  assert.equal(admitted.heldBy, 'all 2 slots busy');
  assert.equal(admitted.forced, undefined);
});

test('KV cache: none from kvHigh until back under kvLow (hysteresis), then admitted', async () => {
  const { gate, set } = gateReading(load({ kvCacheUsage: 0.85 }));
  const pending = gate.admit(settings);
  await new Promise((r) => setTimeout(r, 400));
  set(load({ kvCacheUsage: 0.7 })); // under kvHigh, not yet under kvLow: still held
  await new Promise((r) => setTimeout(r, 600));
  let settled = false;
  void pending.then(() => (settled = true));
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(settled, false, 'held between kvLow and kvHigh after passing kvHigh');
  set(load({ kvCacheUsage: 0.5 }));
  const a = await pending;
  assert.match(a.heldBy ?? '', /KV cache 70% \(at or past 80%, waiting for it under 60%\)/);
});

test('a server with requests queued admits nothing; after the longest wait a call goes anyway and says why', async () => {
  const { gate } = gateReading(load({ waiting: 3, running: 8 }));
  const a = await gate.admit({ ...settings, maxWaitMs: 700 });
  assert.ok(a.waitedMs >= 700);
  assert.deepEqual([a.forced, a.heldBy], [true, '3 requests already queued on the server']);
});

test("admission off sends at once whatever the server's load", async () => {
  const { gate } = gateReading(load({ waiting: 5 }));
  const a = await gate.admit({ ...settings, mode: 'off' });
  assert.deepEqual([a.waitedMs, a.load], [0, null]);
});

test("the servers' metrics text: samples summed over labels, comments and NaN skipped", () => {
  const sums = prometheusSums(['# HELP vllm:num_requests_running x', 'vllm:num_requests_running{engine="0",model_name="m"} 3', 'vllm:num_requests_running{engine="1",model_name="m"} 2', 'vllm:num_requests_waiting{model_name="m"} 0', 'vllm:kv_cache_usage_perc{model_name="m"} 0.42', 'llamacpp:requests_processing 1', 'broken NaN'].join('\n'));
  assert.deepEqual([sums.get('vllm:num_requests_running'), sums.get('vllm:num_requests_waiting'), sums.get('vllm:kv_cache_usage_perc'), sums.get('llamacpp:requests_processing'), sums.has('broken')], [5, 0, 0.42, 1, false]);
  assert.equal(describeLoad(load({ running: 5, waiting: 0, kvCacheUsage: 0.42 })), '5 running · 0 waiting · KV cache 42%');
  assert.equal(describeLoad(null), 'load unknown (the server reports none)');
});
