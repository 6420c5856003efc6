/**
 * A configured chat template (tokens.chatTemplate, pipeline mode) is read and
 * checked before anything starts: a bad one is refused naming the file and
 * the fix; a good one is carried as text with its sha256. Rendering continues
 * a trailing assistant message, as llama.cpp's /apply-template does (the
 * real-model test compares the two byte for byte).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BatchInputError, resolveBatch, type SubmitBatchOptions } from '../../client/submitBatch.js';
import { ConfiguredTemplate } from '../../policies/tokens/chatTemplate/configuredTemplate.js';
import { TOOL_SCHEMAS } from '../../shared/tools.js';

const task = join(resolve(dirname(fileURLToPath(import.meta.url)), '../../examples/tasks'), 'write-greeting');
const dir = mkdtempSync(join(tmpdir(), 'chat-template-test-'));

/** ChatML with tools, the shape of Qwen's template. */
const CHATML = `{%- if tools %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '\\n<tools>' }}{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}{{- '\\n</tools><|im_end|>\\n' }}{%- endif %}
{%- for message in messages %}{%- if message.role == 'user' or (message.role == 'assistant') %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- elif message.role == 'tool' %}{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}{%- endif %}{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}`;

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

function options(chatTemplate: string, mode: 'pipeline' | 'server' = 'pipeline'): SubmitBatchOptions {
  return { batchId: 'b1', tasks: [task], groupSize: 2, policy: { kind: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'm', tokens: { mode, chatTemplate } } };
}

function refused(chatTemplate: string, pattern: RegExp, mode: 'pipeline' | 'server' = 'pipeline'): void {
  assert.throws(
    () => resolveBatch(options(chatTemplate, mode)),
    (err: Error) => {
      assert.ok(err instanceof BatchInputError, err.message);
      assert.match(err.message, pattern);
      return true;
    },
  );
}

test('a good template is carried with its sha256 in the workflow input (and so the experiment record)', () => {
  const path = file('chatml.jinja', CHATML);
  const [input] = resolveBatch(options(path));
  assert.ok(input && input.policy.kind === 'openai');
  assert.deepEqual(input.policy.tokens.chatTemplate, { file: path, sha256: createHash('sha256').update(CHATML).digest('hex'), text: CHATML });
});

test('a template that cannot be read, does not parse, hides tools or tool results, or is not prefix-stable is refused naming the file and the fix', () => {
  const missing = join(dir, 'nope.jinja');
  refused(missing, new RegExp(`chat template ${missing}: cannot read it \\(ENOENT\\).*Fix: give a Jinja chat template`));
  refused(file('empty.jinja', '  \n'), /empty\.jinja is empty\. Fix:/);
  const broken = file('broken.jinja', '{%- for message in messages %}{{ message.content }');
  refused(broken, new RegExp(`chat template ${broken}: it is not a Jinja template this pipeline can parse: .*Fix:`));
  refused(file('no-tools.jinja', CHATML.replace('{{- tool | tojson }}', '')), /no-tools\.jinja: it does not render the tools it is given/);
  refused(file('no-tool-results.jinja', CHATML.replace("message.role == 'tool'", "message.role == 'ipython'")), /no-tool-results\.jinja: it does not render a tool message/);
  // Counts the messages in the system turn: every new message changes the text before it, so turn k+1 could not extend turn k.
  const unstable = CHATML.replace("messages[0]['content'] + '\\n<tools>'", "messages[0]['content'] + ' (' + (messages | length | string) + ' messages)\\n<tools>'");
  assert.notEqual(unstable, CHATML);
  refused(file('unstable.jinja', unstable), /unstable\.jinja: a tool message after an assistant turn changes the text rendered before it \(not prefix-stable\)/);
  refused(file('raises.jinja', `{{ raise_exception('no system role') }}`), /raises\.jinja: rendering a probe conversation fails: .*no system role/);
});

test('a template in server mode is refused: the server renders with its own there', () => {
  refused(file('ok.jinja', CHATML), /tokens\.chatTemplate: chatTemplate is what the pipeline renders prompts with, so it needs tokens\.mode "pipeline"/, 'server');
});

test('a trailing assistant message is continued, not closed; a leading bos_token is left to the tokenizer', () => {
  const template = new ConfiguredTemplate(`{{ bos_token }}${CHATML}`);
  const special = { bosToken: '<s>', eosToken: '<|im_end|>' };
  const system = { role: 'system' as const, content: 'S' };
  const user = { role: 'user' as const, content: 'u' };
  const open = template.render([system, user], TOOL_SCHEMAS, special);
  assert.ok(open.startsWith('<|im_start|>system\nS\n<tools>\n{') && open.endsWith('<|im_start|>user\nu<|im_end|>\n<|im_start|>assistant\n'), open);
  assert.equal(template.render([system, user, { role: 'assistant', content: 'a' }], TOOL_SCHEMAS, special), `${open.slice(0, -'<|im_start|>assistant\n'.length)}<|im_start|>assistant\na`);
});
