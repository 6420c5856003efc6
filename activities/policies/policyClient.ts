/** One step of a policy: given the conversation so far, the next assistant message. */
import type { LoadedTask } from '../../shared/task.js';
import type { AssistantMessage, ChatMessage, ToolCallParserName, ToolSchema } from '../../shared/tools.js';

export interface PolicyRequest {
  messages: ChatMessage[];
  tools: readonly ToolSchema[];
  task: LoadedTask;
  rolloutIndex: number;
  attempt: number;
  turn: number;
}

export interface PolicyResponse {
  assistant: AssistantMessage;
  model: string;
  finishReason: string | null;
  usage: Record<string, number> | null;
  tokens: Record<string, unknown> | null;
  /** Which parser read each of `assistant.tool_calls` (openai policy; toolCallParsing/). */
  toolCallParsers?: ToolCallParserName[];
  /** The content as the model wrote it, when a text parser took tool calls out of it. */
  rawContent?: string;
}

export interface PolicyClient {
  next(request: PolicyRequest): Promise<PolicyResponse>;
}
