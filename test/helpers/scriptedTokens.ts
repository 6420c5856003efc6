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
        const key = JSON.stringify(m.tool_calls ?? m.content);
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
    const toolCalls = answer.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
    generated.set(JSON.stringify(toolCalls.length > 0 ? toolCalls : answer.content), completionIds);
    return { promptIds: prompt, completionIds };
  };
  return { tokens, breaks };
}
