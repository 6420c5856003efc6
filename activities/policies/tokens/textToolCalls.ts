/**
 * Tool calls a model wrote as text, for token-level mode (the server returns
 * plain text there): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
 * (Qwen, Hermes) and fenced ```json blocks holding the same object. A block
 * that does not parse is kept as a call with the raw text as arguments, so the
 * pipeline reports it as malformed to the model instead of dropping it.
 */
import type { ToolCall } from '../../../shared/tools.js';

export interface TextToolCalls {
  content: string | null;
  toolCalls: ToolCall[];
  /** Which syntax the calls were read from, recorded with the turn. */
  parser: 'tool_call_tags' | 'fenced_json' | null;
}

const TAGS = /<tool_call>\s*([\s\S]*?)\s*(?:<\/tool_call>|$)/g;
const FENCE = /```(?:json)?\s*\n([\s\S]*?)\n?```/g;

function toCall(raw: string, id: string): ToolCall | null {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return { id, type: 'function', function: { name: '', arguments: raw } };
  }
  if (typeof value !== 'object' || value === null || !('name' in value)) return null;
  const { name, arguments: args } = value as { name: unknown; arguments?: unknown };
  return { id, type: 'function', function: { name: String(name), arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) } };
}

export function parseTextToolCalls(text: string, turn: number): TextToolCalls {
  for (const [parser, pattern] of [['tool_call_tags', TAGS], ['fenced_json', FENCE]] as const) {
    const calls: ToolCall[] = [];
    let rest = text;
    for (const match of text.matchAll(pattern)) {
      const call = toCall(match[1] ?? '', `call_${turn}_${calls.length}`);
      if (!call) continue;
      calls.push(call);
      rest = rest.replace(match[0], '');
    }
    if (calls.length > 0) return { content: rest.trim() === '' ? null : rest.trim(), toolCalls: calls, parser };
  }
  return { content: text, toolCalls: [], parser: null };
}
