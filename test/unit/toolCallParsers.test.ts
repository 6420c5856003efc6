/**
 * The tool-call text parsers on the answers Qwen2.5-Coder-0.5B-Instruct gave on
 * llama.cpp (xllamacpp 2026.10.11549) to the sample tasks, copied verbatim from
 * its responses (2026-12-01), and the policy setting that picks them.
 */
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseToolCall } from '../../agent/toolArguments.js';
import { readToolCalls, toolCallParsersOf } from '../../policies/toolCallParsing/readToolCalls.js';
import { parseBareJson, parseFencedJson, parseHermesTags } from '../../policies/toolCallParsing/textToolCalls.js';
import { wireMessages } from '../../policies/wireMessages.js';
import { BatchInputError, resolveBatch, type SubmitBatchOptions } from '../../client/submitBatch.js';
import type { ChatMessage, ToolCall } from '../../shared/tools.js';

/** With the GGUF's own template the model writes its calls as content, in these shapes. */
const REAL = {
  fencedPretty: '```json\n{\n  "name": "write_file",\n  "arguments": {\n    "path": "/app/greeting.txt",\n    "content": "Hello, rollout!\\nRewards are earned."\n  }\n}\n```',
  fencedOneLine: '```json\n{"name": "bash", "arguments": {"command": "echo Hello, rollout!"}}\n```',
  bare: '{\n    "name": "bash",\n    "arguments": {\n        "command": "echo Hello, rollout!"\n    }\n}',
  bareOneLine: '{"name": "bash", "arguments": {"command": "echo \'Hello, rollout!\'"}}',
  /** finish_reason "length" at max_tokens 8. */
  fencedCutOff: '```json\n{"name": "bash',
  /** finish_reason "length" at max_tokens 300: the model rambled newlines into the content. */
  bareCutOff: '{"name": "write_file", "arguments": {"path": "/app/greeting.txt", "content": "Hello, rollout!\\nRewards are earned.\\n\\n\\n\\n\\n',
  /** A shell block in prose: code the model shows, not a call. */
  proseWithBash:
    'To create the file `/app/greeting.txt` containing the line "Hello, rollout!", you can use the following command:\n\n```bash\necho "Hello, rollout!" > /app/greeting.txt\n```\n\nThis command uses the `echo` command to write the specified line to the file `/app/greeting.txt`.',
  /** Prose holding JSON that does not start the answer. */
  proseWithJson: 'Mark the function and its arguments as such:\n\n{"name": "median", "arguments": ["numbers", "type", "result"]}\n\n',
  /** The shape the GGUF's template asks for (Hermes / Qwen <tool_call> tags). */
  hermes: '<tool_call>\n{"name": "read_file", "arguments": {"path": "/app/stats.py"}}\n</tool_call>',
};

test('fenced ```json blocks are read as calls, whether pretty-printed or on one line', () => {
  const pretty = parseFencedJson(REAL.fencedPretty);
  assert.deepEqual(pretty.calls, [{ name: 'write_file', arguments: JSON.stringify({ path: '/app/greeting.txt', content: 'Hello, rollout!\nRewards are earned.' }) }]);
  assert.equal(pretty.rest, null);
  assert.deepEqual(parseFencedJson(REAL.fencedOneLine).calls, [{ name: 'bash', arguments: '{"command":"echo Hello, rollout!"}' }]);
  assert.deepEqual(parseFencedJson(REAL.proseWithBash).calls, [], 'a ```bash block is not a call');
});

test('<tool_call> tags are read as calls; text around them is kept as content', () => {
  const parsed = parseHermesTags(`Let me look first.\n${REAL.hermes}`);
  assert.deepEqual(parsed.calls, [{ name: 'read_file', arguments: '{"path":"/app/stats.py"}' }]);
  assert.equal(parsed.rest, 'Let me look first.');
  assert.deepEqual(parseHermesTags(REAL.fencedOneLine).calls, []);
});

test('content that is nothing but a call object is read by bare-json, prose with JSON in it is not', () => {
  assert.deepEqual(parseBareJson(REAL.bare).calls, [{ name: 'bash', arguments: '{"command":"echo Hello, rollout!"}' }]);
  assert.deepEqual(parseBareJson(REAL.bareOneLine).calls, [{ name: 'bash', arguments: '{"command":"echo \'Hello, rollout!\'"}' }]);
  assert.deepEqual(parseBareJson(REAL.proseWithJson).calls, []);
  assert.deepEqual(parseBareJson('{"answer": 42}').calls, [], 'JSON without a name is no call');
});

test('a call cut off by max_tokens is returned as a malformed call, not dropped', () => {
  for (const [content, parse, name] of [
    [REAL.fencedCutOff, parseFencedJson, 'bash'],
    [REAL.bareCutOff, parseBareJson, 'write_file'],
  ] as const) {
    const [call, ...more] = parse(content).calls;
    assert.ok(call, `a call from ${JSON.stringify(content.slice(0, 30))}`);
    assert.equal(more.length, 0);
    assert.equal(call.name, name);
    const checked = parseToolCall({ id: 'c', type: 'function', function: call });
    assert.equal(checked.ok, false);
    assert.match(checked.ok ? '' : checked.error, /not valid JSON/, 'the model is told its arguments are broken');
  }
});

test('parsers are tried in order; the first that finds calls wins and is recorded with each call', () => {
  const serverCall: ToolCall = { id: 'srv1', type: 'function', function: { name: 'bash', arguments: '{"command":"ls"}' } };
  const id = (i: number): string => `call_3_${i}`;
  const all = toolCallParsersOf(['server', 'fenced-json', 'hermes-tags', 'bare-json']);
  const fromServer = readToolCalls({ content: '', serverCalls: [serverCall] }, all, id);
  assert.deepEqual(fromServer.toolCallParsers, ['server']);
  assert.equal(fromServer.assistant.tool_calls?.[0]?.id, 'srv1');
  assert.equal(fromServer.rawContent, undefined);

  const fromText = readToolCalls({ content: REAL.fencedPretty, serverCalls: [] }, all, id);
  assert.deepEqual(fromText.toolCallParsers, ['fenced-json']);
  assert.deepEqual(fromText.assistant, {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_3_0', type: 'function', function: { name: 'write_file', arguments: JSON.stringify({ path: '/app/greeting.txt', content: 'Hello, rollout!\nRewards are earned.' }) } }],
  });
  assert.equal(fromText.rawContent, REAL.fencedPretty, 'what the model wrote is kept whole');

  assert.deepEqual(readToolCalls({ content: REAL.bare, serverCalls: [] }, all, id).toolCallParsers, ['bare-json']);
  const serverOnly = readToolCalls({ content: REAL.fencedPretty, serverCalls: [] }, toolCallParsersOf('server'), id);
  assert.deepEqual([serverOnly.assistant.tool_calls, serverOnly.assistant.content, serverOnly.toolCallParsers], [undefined, REAL.fencedPretty, []]);
  assert.deepEqual(toolCallParsersOf(undefined), ['server'], 'rollouts started before the setting read the server only');
});

test('a malformed call goes back to the server with JSON arguments holding its exact text', () => {
  const messages: ChatMessage[] = [
    { role: 'user', content: 'hi' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'a', type: 'function', function: { name: 'bash', arguments: '{"command' } },
        { id: 'b', type: 'function', function: { name: 'submit', arguments: '' } },
        { id: 'c', type: 'function', function: { name: 'bash', arguments: '{"command":"ls"}' } },
      ],
    },
  ];
  const wire = wireMessages(messages);
  const args = wire[1]?.role === 'assistant' ? wire[1].tool_calls?.map((c) => c.function.arguments) : [];
  assert.deepEqual(args, ['"{\\"command"', '{}', '{"command":"ls"}']);
  assert.equal(JSON.parse(args?.[0] ?? ''), '{"command', 'the text the model wrote survives');
  assert.equal(messages[1]?.role === 'assistant' ? messages[1].tool_calls?.[0]?.function.arguments : '', '{"command', 'the stored conversation is not changed');
});

test('an unknown tool-call parser is refused with the names that exist', () => {
  const task = join(resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks'), 'write-greeting');
  const base = { batchId: 'b1', tasks: [task], groupSize: 2 };
  const policy = { kind: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm' } as const;
  for (const toolCallParser of ['xml', ['server', 'qwen']]) {
    assert.throws(
      () => resolveBatch({ ...base, policy: { ...policy, toolCallParser } } as unknown as SubmitBatchOptions),
      (err: Error) => err instanceof BatchInputError && /policy\.toolCallParser: unknown tool-call parser "(xml|qwen)"; the parsers are server, fenced-json, hermes-tags, bare-json/.test(err.message),
    );
  }
  const [input] = resolveBatch({ ...base, policy: { ...policy, toolCallParser: ['fenced-json', 'server'] } });
  assert.deepEqual(input?.policy.kind === 'openai' ? input.policy.toolCallParser : undefined, ['fenced-json', 'server']);
  const [defaults] = resolveBatch({ ...base, policy });
  assert.deepEqual(defaults?.policy.kind === 'openai' ? [defaults.policy.toolCallParser, defaults.policy.sampling.max_tokens] : undefined, ['server', 1024]);
});
