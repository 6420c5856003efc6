/**
 * The conversation as sent to an OpenAI-compatible server. A tool call the
 * model left malformed (cut off by max_tokens, or not JSON) keeps its exact
 * text, but its arguments go out as a JSON string holding that text, and
 * empty arguments as `{}`: servers that re-render earlier calls through the
 * chat template parse the arguments, and llama.cpp answers 500 "Failed to
 * parse tool call arguments as JSON" otherwise, which would turn the model's
 * malformed call into an endless infra failure.
 */
import type { ChatMessage, ToolCall } from '../shared/tools.js';

function wireArguments(args: string): string {
  if (args.trim() === '') return '{}';
  try {
    JSON.parse(args);
    return args;
  } catch {
    return JSON.stringify(args);
  }
}

export function wireMessages(messages: readonly ChatMessage[]): ChatMessage[] {
  return messages.map((m) => {
    if (m.role !== 'assistant' || !m.tool_calls) return m;
    const tool_calls: ToolCall[] = m.tool_calls.map((c) => ({ ...c, function: { ...c.function, arguments: wireArguments(c.function.arguments) } }));
    return { ...m, tool_calls };
  });
}
