/**
 * Reads the tool calls of one answer with the policy's configured parsers
 * (`toolCallParser`: one name or a list tried in order; the first that finds
 * a call wins) and records which parser read each call. When a text parser
 * took calls out of the content, the assistant message carries them as
 * `tool_calls` (so the next request renders them as calls) and the content
 * the model wrote is kept whole in `rawContent`.
 */
import { TOOL_CALL_PARSERS, type AssistantMessage, type ToolCall, type ToolCallParserName } from '../../shared/tools.js';
import { parseBareJson, parseFencedJson, parseHermesTags, type TextParse } from './textToolCalls.js';

const TEXT_PARSERS: Record<Exclude<ToolCallParserName, 'server'>, (content: string) => TextParse> = {
  'fenced-json': parseFencedJson,
  'hermes-tags': parseHermesTags,
  'bare-json': parseBareJson,
};

export interface ReadToolCalls {
  assistant: AssistantMessage;
  /** Which parser read each of `assistant.tool_calls`, index for index. */
  toolCallParsers: ToolCallParserName[];
  /** The content as the model wrote it, when a text parser changed it. */
  rawContent?: string;
}

/** The configured parsers as a list; a rollout started before the setting existed reads the server's calls only. */
export function toolCallParsersOf(setting: ToolCallParserName | readonly ToolCallParserName[] | undefined): readonly ToolCallParserName[] {
  const names = setting === undefined ? ['server' as const] : typeof setting === 'string' ? [setting] : setting;
  for (const name of names) {
    // The batch schema refuses unknown names; this guards callers that skip it.
    if (!(TOOL_CALL_PARSERS as readonly string[]).includes(name)) throw new Error(`unknown tool-call parser ${JSON.stringify(name)}; the parsers are ${TOOL_CALL_PARSERS.join(', ')}`);
  }
  return names;
}

export function readToolCalls(
  answer: { content: string | null; serverCalls: ToolCall[] },
  parsers: readonly ToolCallParserName[],
  callId: (index: number) => string,
): ReadToolCalls {
  for (const parser of parsers) {
    if (parser === 'server') {
      if (answer.serverCalls.length === 0) continue;
      return { assistant: { role: 'assistant', content: answer.content, tool_calls: answer.serverCalls }, toolCallParsers: answer.serverCalls.map(() => 'server') };
    }
    if (!answer.content) continue;
    const parsed = TEXT_PARSERS[parser](answer.content);
    if (parsed.calls.length === 0) continue;
    const calls: ToolCall[] = parsed.calls.map((c, i) => ({ id: callId(i), type: 'function', function: { name: c.name, arguments: c.arguments } }));
    return { assistant: { role: 'assistant', content: parsed.rest, tool_calls: calls }, toolCallParsers: calls.map(() => parser), rawContent: answer.content };
  }
  return { assistant: { role: 'assistant', content: answer.content }, toolCallParsers: [] };
}
