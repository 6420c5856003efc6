/**
 * The pieces of `rollout show` that need no server: a bash observation splits
 * back into its streams, outputs are cut with their sizes, a turn shows the
 * model's reasoning and a malformed call, and the page escapes what the model
 * wrote in every place it appears.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatBashObservation, parseBashObservation } from '../../agent/bashObservation.js';
import type { PolicyTurnRecord, ToolTurnRecord } from '../../agent/conversation.js';
import { excerpt, sizeLine } from '../../client/show/excerpt.js';
import { rolloutHtml } from '../../client/show/rolloutHtml.js';
import { rolloutText } from '../../client/show/rolloutText.js';
import type { RolloutView } from '../../client/show/rolloutView.js';
import { turnView } from '../../client/show/turnView.js';

test('a bash observation splits back into exit line, stdout and stderr', () => {
  for (const [stdout, stderr] of [['a\nb\n', 'oops\n'], ['', 'only err'], ['only out', ''], ['', '']] as const) {
    const text = formatBashObservation({ exitCode: 3, timedOut: false, stdout, stderr }, 10);
    assert.deepEqual(parseBashObservation(text), { status: 'exit code: 3', stdout, stderr });
  }
  const killed = formatBashObservation({ exitCode: 137, timedOut: true, stdout: 'x', stderr: '' }, 5);
  assert.equal(parseBashObservation(killed)?.status, 'exit code: 137 (killed: the command ran past 5 s)');
  assert.equal(parseBashObservation('error: unknown tool "rm"'), undefined, 'not a bash observation');
});

test('an excerpt keeps the last (or first) lines and says how much there was', () => {
  const text = Array.from({ length: 40 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
  const tail = excerpt(text, 20, 'tail');
  assert.equal(sizeLine('stdout', tail), 'stdout 311 B, 40 lines, showing last 20');
  assert.equal(tail.text.split('\n')[0], 'line 21');
  assert.equal(tail.complete, false);
  assert.equal(sizeLine('stdout', excerpt('x'.repeat(12_600), 20, 'tail')), 'stdout 12.3 KiB, 1 line');
  assert.match(excerpt('x'.repeat(500), 20, 'tail').text, /… \(100 more characters\)$/, 'a very long line is cut too');
  assert.equal(sizeLine('stderr', excerpt('', 20, 'tail')), 'stderr empty');
  assert.equal(sizeLine('content', excerpt(text, 5, 'head')), 'content 311 B, 40 lines, showing first 5');
});

const policy = (over: Partial<PolicyTurnRecord>): PolicyTurnRecord => ({
  turn: 0,
  latencyMs: 812,
  model: 'qwen',
  finishReason: 'tool_calls',
  usage: { prompt_tokens: 100, completion_tokens: 20 },
  tokens: null,
  assistant: { role: 'assistant', content: 'Let me look <b>around</b>.', tool_calls: [{ id: 'c0', type: 'function', function: { name: 'bash', arguments: '{"command": "ls"' } }] },
  ...over,
});
const malformedResult: ToolTurnRecord = { turn: 0, callIndex: 0, toolCallId: 'c0', name: 'bash', arguments: '{"command": "ls"', observation: 'error: arguments are not valid JSON', exitCode: null, timedOut: false, truncated: false, durationMs: 0, malformed: true };

test("a turn shows the model's reasoning, its message and a malformed call with the error it got", () => {
  const view = turnView({ policy: policy({ reasoning: 'The user wants <script>x</script>.' }), tools: [malformedResult] }, { lines: 20 }, true);
  assert.equal(view.reasoning?.full, 'The user wants <script>x</script>.');
  assert.equal(view.content?.full, 'Let me look <b>around</b>.');
  const [call] = view.calls;
  assert.equal(call?.headline, 'bash', 'unparseable arguments: the name, and the raw arguments below');
  assert.equal(call?.arguments[0]?.full, '{"command": "ls"');
  assert.equal(call?.result?.malformed, true);
  assert.equal(call?.result?.sections[0]?.label, 'error');
  assert.equal(turnView({ policy: policy({}), tools: [] }, { lines: 20 }, true).reasoning, undefined, 'no reasoning when the server sent none');
});

test('the page escapes the reasoning, the message, tool arguments and outputs, the evidence and the instruction', () => {
  const planted = '<script>document.title="pwned"</script>';
  const result: ToolTurnRecord = { ...malformedResult, name: 'bash', malformed: false, exitCode: 0, observation: formatBashObservation({ exitCode: 0, timedOut: false, stdout: planted, stderr: planted }, 10), durationMs: 5 };
  const turn = turnView(
    { policy: policy({ reasoning: planted, assistant: { role: 'assistant', content: planted, tool_calls: [{ id: 'c0', type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command: `echo '${planted}'` }) } }] } }), tools: [result] },
    { lines: 20 },
    true,
  );
  const view: RolloutView = {
    state: { workflowId: 'rollout/b/t/0', status: 'running', batchId: 'b', taskId: 't', index: 0, trajectoryRef: 'b/t/0', startTime: undefined, closeTime: undefined },
    storeLocation: '/store/b/t/0',
    instruction: { label: 'instruction', excerpt: excerpt(planted, 20, 'head'), full: planted },
    attempts: [{ attempt: 0, summary: { attempt: 0, outcomeClass: 'infra', outcomeType: 'sandbox_lost', message: planted, reward: null, turns: 1 }, running: false, recorded: '1 policy turn', turns: [turn] }],
  };
  const html = rolloutHtml(view);
  assert.doesNotMatch(html, /<script/);
  assert.equal(html.split('&lt;script&gt;').length - 1, 7, 'instruction, evidence, reasoning, message, command, stdout and stderr, each once');
});

test('the text escapes control characters the agent printed, so none reaches the terminal', () => {
  const hostile = 'ok\x1b]0;owned\x07\x1b[2J\rgone\tstays';
  const result: ToolTurnRecord = { ...malformedResult, malformed: false, exitCode: 0, observation: formatBashObservation({ exitCode: 0, timedOut: false, stdout: hostile, stderr: '' }, 10), durationMs: 5 };
  const turn = turnView({ policy: policy({ assistant: { role: 'assistant', content: null, tool_calls: [{ id: 'c0', type: 'function', function: { name: 'bash', arguments: '{"command": "cat log"}' } }] } }), tools: [result] }, { lines: 20 }, true);
  const view: RolloutView = {
    state: { workflowId: 'rollout/b/t/0', status: 'running', batchId: 'b', taskId: 't', index: 0, trajectoryRef: 'b/t/0', startTime: undefined, closeTime: undefined },
    storeLocation: '/store/b/t/0',
    attempts: [{ attempt: 0, running: true, recorded: '1 policy turn', turns: [turn] }],
  };
  const text = rolloutText(view);
  assert.doesNotMatch(text, /[\x00-\x08\x0b-\x1f\x7f]/, 'no control character but newline and tab');
  assert.ok(text.includes('| ok\\x1b]0;owned\\x07\\x1b[2J\\x0dgone\tstays'), text);
});

test('a turn shows what the trainer gets: ids and their source, the template, the prefix check, the policy version', () => {
  const ids = { source: 'pipeline' as const, promptIds: [1, 2, 3, 4], completionIds: [5, 6], completionLogprobs: [-0.1, -0.2], chatTemplate: { source: 'configured' as const, sha256: 'ab'.repeat(32), file: 'qwen.jinja' } };
  const ok = turnView({ policy: policy({ turnTokens: ids, prefixCheck: { ok: true }, policyVersion: 3 }), tools: [] }, { lines: 20 }, true);
  assert.equal(ok.tokens, 'token ids: prompt 4 + completion 2 (pipeline) · template configured sha256 abababababab (qwen.jinja) · LOGPROBS UNVERIFIED: recorded before sampling was kept · prefix ok · policy version 3');
  const params = { temperature: 0.7, top_p: 0.95, top_k: 40, min_p: 0.05, presence_penalty: 0, frequency_penalty: 0, repetition_penalty: 1 };
  const sampled = turnView({ policy: policy({ turnTokens: { ...ids, sampling: { server: 'llama.cpp', params, paramsFrom: 'server', logprobs: 'post-sampling' } } }), tools: [] }, { lines: 20 }, true);
  assert.match(sampled.tokens ?? '', / · sampled at temperature 0\.7 top_k 40 top_p 0\.95 min_p 0\.05 on llama\.cpp \(as it reported\), post-sampling logprobs$/);
  const flagged = turnView({ policy: policy({ turnTokens: { ...ids, sampling: { server: 'vllm', params, paramsFrom: 'request', logprobs: 'raw', mismatch: 'the logprobs are the raw model’s' } } }), tools: [] }, { lines: 20 }, true);
  assert.match(flagged.tokens ?? '', /on vllm \(as sent\), raw logprobs · LOGPROBS NOT THE SAMPLING DISTRIBUTION'S: the logprobs are the raw model’s/);
  const broken = turnView({ policy: policy({ turnTokens: ids, prefixCheck: { ok: false, position: 2, expected: 3, actual: 9, reason: 're-rendered differently' } }), tools: [] }, { lines: 20 }, true);
  assert.match(broken.tokens ?? '', /prefix break at 2: re-rendered differently/);
  const missing = turnView({ policy: policy({ turnTokens: { reason: 'the server returned no logprobs' } }), tools: [] }, { lines: 20 }, true);
  assert.equal(missing.tokens, 'no token ids: the server returned no logprobs');
  assert.equal(turnView({ policy: policy({}), tools: [] }, { lines: 20 }, true).tokens, undefined, 'a scripted turn says nothing about tokens');
  const view: RolloutView = {
    state: { workflowId: 'rollout/b/t/0', status: 'completed', batchId: 'b', taskId: 't', index: 0, trajectoryRef: 'b/t/0', startTime: undefined, closeTime: undefined },
    storeLocation: '/store/b/t/0',
    attempts: [{ attempt: 0, running: false, recorded: '1 policy turn', turns: [ok] }],
  };
  assert.match(rolloutText(view), /^ {2}token ids: prompt 4 \+ completion 2 \(pipeline\)/m);
  assert.match(rolloutHtml(view), /<div class="facts">token ids: prompt 4 \+ completion 2/);
});
