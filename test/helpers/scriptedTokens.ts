/**
 * Token ids for the scripted OpenAI server (a fault injector at the edge, not
 * a tokenizer): one id per character. The server "generates" an answer's
 * characters and renders a conversation the way a well-behaved server does:
 * each earlier assistant message as exactly the ids it generated for it, so
 * the exact-prefix rule holds. `reRenderTurn` makes it re-render one earlier
 * turn differently (as chat templates do to tool calls), breaking the rule at
 * a known position.
 */
import type { ChatRequest, ScriptedServerOptions } from './scriptedOpenAIServer.js';

const ids = (text: string): number[] => Array.from(text, (c) => c.codePointAt(0) ?? 0);
const EOS = 3;
const HEADER = ids('<assistant>');

interface WireCall {
  id?: string;
  function: { name: string; arguments: string };
}

/**
 * What a chat template reads of an assistant message: its tool calls (id, name, arguments) or else its
 * content; not the order of the JSON keys a client sends them back in (a harness's litellm reorders them).
 */
function renderKey(content: string | null, calls: WireCall[]): string {
  return JSON.stringify(calls.length > 0 ? calls.map((c) => [c.id ?? '', c.function.name, c.function.arguments]) : content);
}

export interface ScriptedTokens {
  tokens: NonNullable<ScriptedServerOptions['tokens']>;
  /** The first prompt position where the re-rendered turn differs, per request that had one. */
  breaks: number[];
}

export function scriptedTokens(options: { reRenderTurn?: number } = {}): ScriptedTokens {
  const generated = new Map<string, number[]>();
  const breaks: number[] = [];
  const tokens: ScriptedTokens['tokens'] = (request: ChatRequest, answer) => {
    const prompt: number[] = [];
    let assistantTurn = 0;
    for (const m of request.messages) {
      if (m.role === 'assistant') {
        const key = renderKey(m.content, (m.tool_calls ?? []) as WireCall[]);
        const original = generated.get(key) ?? ids(`${m.content ?? ''}`);
        if (assistantTurn === options.reRenderTurn) {
          breaks.push(prompt.length + HEADER.length);
          prompt.push(...HEADER, ...ids(' '), ...original);
        } else prompt.push(...HEADER, ...original);
        assistantTurn++;
      } else prompt.push(...ids(`<${m.role}>${m.content ?? ''}`));
    }
    prompt.push(...HEADER);
    const completionIds = [...ids(answer.content ?? ''), ...ids(JSON.stringify(answer.toolCalls.map((c) => [c.name, c.arguments]))), EOS];
    generated.set(renderKey(answer.content, answer.toolCalls.map((c) => ({ id: c.id, function: { name: c.name, arguments: c.arguments } }))), completionIds);
    return { promptIds: prompt, completionIds };
  };
  return { tokens, breaks };
}
