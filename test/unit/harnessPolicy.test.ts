/**
 * The harness policy's pieces that need no harness running: its schema and the command line's
 * errors, what a harness's exit means in the failure taxonomy, the capture endpoint's routes and the
 * requests it refuses, and how an attempt's turns split into training segments.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startCaptureEndpoint } from '../../harnesses/captureEndpoint.js';
import { readHarnessRequest } from '../../harnesses/capturedCall.js';
import { harnessOutcome, type HarnessExit } from '../../harnesses/harnessOutcome.js';
import { installedHarness } from '../../harnesses/harnessInstall.js';
import { parsePolicy } from '../../client/cli/cliSettings.js';
import { segmentRanges } from '../../client/export/trainingSample.js';
import { resolveBatch } from '../../client/submitBatch.js';
import { ClassifiedError } from '../../shared/failures.js';
import { GroupInputSchema, harnessProblem, PolicyConfigSchema } from '../../shared/pipeline.js';
import { policyLabel } from '../../shared/policyLabel.js';

const inference = { kind: 'openai' as const, baseUrl: 'http://127.0.0.1:8080/v1', model: 'qwen' };
const issues = (input: unknown): string => {
  const r = PolicyConfigSchema.safeParse(input);
  return r.success ? '' : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
};

test('the harness policy: an unknown harness and another version are refused with the fix', () => {
  assert.match(issues({ kind: 'harness', harness: 'openhands', inference }), /harness: unknown harness "openhands"; the harnesses are mini-swe-agent, terminus-2\. Fix: set policy\.harness/);
  assert.match(issues({ kind: 'harness', harness: 'mini-swe-agent', version: '2.5.0', inference }), /version: mini-swe-agent 2\.5\.0 is not the version this pipeline runs \(2\.4\.6\)/);
  const ok = PolicyConfigSchema.parse({ kind: 'harness', harness: 'mini-swe-agent', version: '2.4.6', inference });
  assert.equal(policyLabel(ok), 'mini-swe-agent:qwen');
  assert.ok(ok.kind === 'harness' && ok.inference.sampling.max_tokens === 1024 && ok.inference.tokens.mode === 'server', "the inference server's defaults are the openai policy's");
});

test('a harness runs whole: resume replay and branching are refused for it', () => {
  const base = { batchId: 'b', task: { id: 't', dir: '/t', version: 'a'.repeat(64) }, groupSize: 2, policy: { kind: 'harness', harness: 'mini-swe-agent', inference } };
  assert.equal(harnessProblem(GroupInputSchema.parse(base)), null);
  assert.match(harnessProblem(GroupInputSchema.parse({ ...base, failurePolicy: { resume: 'replay' } })) ?? '', /resume 'replay' needs the pipeline's own agent loop.*Fix: use resume 'restart'/);
  assert.match(harnessProblem(GroupInputSchema.parse({ ...base, branching: { atTurns: [1], width: 2 } })) ?? '', /branching needs the pipeline's own agent loop/);
});

test('rollout run --policy harness:NAME: the inference server from the openai flags, settings from a JSON file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'harness-cli-'));
  const settings = join(dir, 'mini.json');
  writeFileSync(settings, JSON.stringify({ agent: { step_limit: 5 } }));
  const policy = parsePolicy('harness:mini-swe-agent', { baseUrl: inference.baseUrl, model: 'qwen', temperature: '0.5', harnessSettings: settings });
  assert.deepEqual(policy, { kind: 'harness', harness: 'mini-swe-agent', inference: { kind: 'openai', baseUrl: inference.baseUrl, model: 'qwen', sampling: { temperature: 0.5 } }, settings: { agent: { step_limit: 5 } } });
  assert.throws(() => parsePolicy('harness:mini-swe-agent', {}), /needs --base-url and --model: the inference server its model calls are forwarded to/);
  writeFileSync(settings, 'step_limit: 5');
  assert.throws(() => parsePolicy('harness:mini-swe-agent', { baseUrl: inference.baseUrl, model: 'q', harnessSettings: settings }), /--harness-settings .*mini\.json is not JSON/);
  assert.throws(() => parsePolicy('openai', { baseUrl: inference.baseUrl, model: 'q', harnessSettings: settings }), /--harness-settings is for --policy harness:NAME/);
  assert.throws(() => parsePolicy('agent', {}), /or harness:NAME \(mini-swe-agent, terminus-2\)/);
});

test("a harness's inference server in token mode pipeline gets its chat template read at submission, as the openai policy's", () => {
  const dir = mkdtempSync(join(tmpdir(), 'harness-template-'));
  const template = join(dir, 'template.jinja');
  writeFileSync(template, "{{ tools | tojson }}\n{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
  const root = join(import.meta.dirname, '..', '..');
  const [group] = resolveBatch({ batchId: 'b', tasks: [join(root, 'examples/tasks/write-greeting')], groupSize: 2, policy: { kind: 'harness', harness: 'mini-swe-agent', inference: { ...inference, tokens: { mode: 'pipeline', chatTemplate: template } } } });
  const chatTemplate = group?.policy.kind === 'harness' ? group.policy.inference.tokens.chatTemplate : undefined;
  assert.ok(chatTemplate && typeof chatTemplate === 'object' && /^[0-9a-f]{64}$/.test(chatTemplate.sha256), 'carried as text with its sha256, not as a path the workers cannot read');
});

test('a harness that is not installed is named with its host and the fix', () => {
  const empty = mkdtempSync(join(tmpdir(), 'no-harness-'));
  assert.throws(
    () => installedHarness('mini-swe-agent', 'gpu-7', { ROLLOUT_HARNESS_HOME: empty }),
    (err: unknown) => err instanceof ClassifiedError && err.type === 'harness_not_installed' && /mini-swe-agent 2\.4\.6 is not installed on host gpu-7 .*Fix: run `bash scripts\/ensure-harnesses\.sh`/.test(err.message),
  );
});

test("a harness's exit in the failure taxonomy: the run's own findings first, then the harness's account", () => {
  const exit = (e: Partial<HarnessExit>): HarnessExit => ({ harness: 'mini-swe-agent', exitCode: 0, exitSignal: null, exitStatus: 'Submitted', stderrTail: 'line 1\nTraceback: boom', turns: 2, stopped: null, sawContextOverflow: false, ...e });
  assert.equal(harnessOutcome(exit({})), null, 'submitted');
  const kind = (e: Partial<HarnessExit>): string => {
    const o = harnessOutcome(exit(e));
    return o === null ? 'submitted' : o instanceof ClassifiedError ? `${o.failureClass}/${o.type}` : `${o.failureClass}/${o.type}`;
  };
  assert.equal(kind({ exitStatus: 'LimitsExceeded' }), 'model/max_turns');
  assert.equal(kind({ exitStatus: 'RepeatedFormatError' }), 'model/malformed_tool_call');
  assert.equal(kind({ exitCode: 1, exitStatus: 'ContextWindowExceededError' }), 'model/context_overflow');
  assert.equal(kind({ exitCode: 1, exitStatus: 'KeyError' }), 'model/harness_crashed');
  assert.equal(kind({ exitCode: 1, exitStatus: 'BadRequestError', sawContextOverflow: true }), 'model/context_overflow');
  assert.equal(kind({ exitCode: 1, exitStatus: 'UndefinedError', turns: 0 }), 'infra/harness_never_called_model');
  assert.equal(kind({ exitCode: 0, exitStatus: null, turns: 0 }), 'infra/harness_never_called_model');
  // Found by the run itself: a limit it enforced, or infra under the harness, whatever the harness said after.
  assert.equal(kind({ exitCode: null, exitSignal: 'SIGTERM', exitStatus: null, stopped: { failureClass: 'model', type: 'agent_timeout', message: 'budget' } }), 'model/agent_timeout');
  const infra = harnessOutcome(exit({ exitCode: 1, exitStatus: 'InternalServerError', stopped: new ClassifiedError('infra', 'policy_unavailable', 'down') }));
  assert.ok(infra instanceof ClassifiedError && infra.type === 'policy_unavailable');
  assert.ok(infra.evidence.includes('stderr: Traceback: boom'), 'the stderr tail is the evidence');
  const crash = harnessOutcome(exit({ exitCode: 1, exitStatus: 'KeyError' }));
  assert.ok(crash && !(crash instanceof ClassifiedError) && crash.evidence?.[0] === 'mini-swe-agent exited with code 1 (KeyError)');
});

test('the capture endpoint serves its routes under its secret path only, and refuses what it cannot serve', async () => {
  const seen: string[] = [];
  const endpoint = await startCaptureEndpoint({
    model: 'qwen',
    chat: (body) => {
      const request = readHarnessRequest(body);
      if (typeof request === 'string') return Promise.resolve({ status: 400, body: { error: { message: request } } });
      seen.push(`chat ${JSON.stringify(request.overridden)}`);
      return Promise.resolve({ status: 200, body: { ok: true } });
    },
    exec: (body) => {
      seen.push(`exec ${String(body.command)}`);
      return Promise.resolve({ status: 200, body: { stdout: '', stderr: '', exitCode: 0 } });
    },
  });
  try {
    const post = (url: string, body: unknown): Promise<Response> => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const root = new URL(endpoint.apiBase).origin;
    assert.equal((await post(`${root}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] })).status, 404, 'not without the secret path');
    assert.equal((await post(`${endpoint.apiBase}/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], temperature: 0.2, max_tokens: 9 })).status, 200);
    const streaming = await post(`${endpoint.apiBase}/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], stream: true });
    assert.equal(streaming.status, 400);
    assert.match(((await streaming.json()) as { error: { message: string } }).error.message, /streaming is not served/);
    assert.equal((await post(`${endpoint.bridge}/exec`, { command: 'ls' })).status, 200);
    assert.equal((await post(`${endpoint.apiBase}/completions`, { prompt: 'x' })).status, 404);
    const models = (await (await fetch(`${endpoint.apiBase}/models`)).json()) as { data: { id: string }[] };
    assert.deepEqual(models.data.map((m) => m.id), ['qwen']);
    assert.deepEqual(seen, ['chat {"temperature":0.2,"max_tokens":9}', 'exec ls']);
  } finally {
    await endpoint.close();
  }
});

test('training segments: the turns between one start and the next', () => {
  assert.deepEqual(segmentRanges(3), [[0, 3]]);
  assert.deepEqual(segmentRanges(3, [1]), [[0, 1], [1, 3]]);
  assert.deepEqual(segmentRanges(5, [4, 2]), [[0, 2], [2, 4], [4, 5]]);
  assert.deepEqual(segmentRanges(0), [[0, 0]]);
});
