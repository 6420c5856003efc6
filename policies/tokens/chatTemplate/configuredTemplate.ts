/**
 * A chat template the pipeline renders itself (token-level mode with
 * `tokens.chatTemplate`), instead of the server's /apply-template: the Jinja
 * text the user gave, rendered by @huggingface/jinja (made for HF chat
 * templates) with the context HF and llama.cpp give a template (`messages`,
 * `tools`, `add_generation_prompt`, `bos_token`, `eos_token`;
 * `raise_exception` is the library's own). A trailing assistant message is continued, not closed,
 * as llama.cpp's /apply-template does, so nextPromptIds works the same on
 * either. A leading bos_token is left to the tokenizer (`add_special`), as
 * llama.cpp does with the text its template renders.
 */
import { Template } from '@huggingface/jinja';
import { TOOL_SCHEMAS, type ChatMessage, type ToolSchema } from '../../../shared/tools.js';

/** Stands in for a trailing assistant message's content so the render can be cut right after it. */
const SENTINEL = '\u0000continue-here\u0000';

export interface SpecialTokens {
  bosToken: string;
  eosToken: string;
}

export class ConfiguredTemplate {
  private readonly template: Template;

  /** Throws when the text is not a Jinja template @huggingface/jinja can parse. */
  constructor(text: string) {
    this.template = new Template(text);
  }

  render(messages: readonly ChatMessage[], tools: readonly ToolSchema[], special: SpecialTokens): string {
    const context = (list: readonly unknown[], addGenerationPrompt: boolean): Record<string, unknown> => ({
      messages: list,
      tools,
      add_generation_prompt: addGenerationPrompt,
      bos_token: special.bosToken,
      eos_token: special.eosToken,
    });
    const last = messages.at(-1);
    let text: string;
    if (last?.role === 'assistant') {
      const rendered = this.template.render(context([...messages.slice(0, -1), { ...last, content: SENTINEL }], false));
      const at = rendered.lastIndexOf(SENTINEL);
      if (at < 0) throw new Error("the template does not render an assistant message's content");
      text = rendered.slice(0, at) + (last.content ?? '');
    } else {
      text = this.template.render(context(messages, true));
    }
    return special.bosToken !== '' && text.startsWith(special.bosToken) ? text.slice(special.bosToken.length) : text;
  }
}


/**
 * What is wrong with a template for token-level mode, or undefined: it must parse, render a
 * conversation with tools (every message's text in it), and render the messages after an
 * assistant turn as a continuation of what came before (the exact-prefix rule depends on it).
 */
export function chatTemplateProblem(text: string): string | undefined {
  let template: ConfiguredTemplate;
  try {
    template = new ConfiguredTemplate(text);
  } catch (err) {
    return `it is not a Jinja template this pipeline can parse: ${err instanceof Error ? err.message : String(err)}`;
  }
  const special = { bosToken: '', eosToken: '' };
  const system: ChatMessage = { role: 'system', content: 'probe-system' };
  const user: ChatMessage = { role: 'user', content: 'probe-user' };
  const assistant: ChatMessage = { role: 'assistant', content: 'probe-assistant' };
  const tool: ChatMessage = { role: 'tool', tool_call_id: 'call_0', content: 'probe-tool-result' };
  try {
    const first = template.render([system, user], TOOL_SCHEMAS, special);
    for (const needle of ['probe-system', 'probe-user']) if (!first.includes(needle)) return `rendering a system and a user message, the text of "${needle}" is not in what it renders`;
    if (!first.includes(TOOL_SCHEMAS[0]?.function.description ?? 'bash')) return 'it does not render the tools it is given (`tools`): the model would never see the tool schemas';
    const alone = template.render([system, user, assistant], TOOL_SCHEMAS, special);
    const withTool = template.render([system, user, assistant, tool], TOOL_SCHEMAS, special);
    if (!withTool.includes('probe-tool-result')) return 'it does not render a tool message (role "tool"): the model would never see tool results';
    if (!withTool.startsWith(alone)) return 'a tool message after an assistant turn changes the text rendered before it (not prefix-stable), so turn k+1 cannot extend turn k';
  } catch (err) {
    return `rendering a probe conversation fails: ${err instanceof Error ? err.message : String(err)}`;
  }
  return undefined;
}
