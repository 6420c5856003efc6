/** One step of a policy: given the conversation so far, the next assistant message. */
import type { LoadedTask } from '../../shared/task.js';
import type { MissingTokens, TurnTokens } from '../../shared/tokens.js';
import type { AssistantMessage, ChatMessage, ToolSchema } from '../../shared/tools.js';

export interface PolicyRequest {
  messages: ChatMessage[];
  tools: readonly ToolSchema[];
  task: LoadedTask;
  rolloutIndex: number;
  attempt: number;
  turn: number;
  /** The previous turn's token ids in this attempt (token-level mode extends them). */
  previousTokens?: TurnTokens | null;
}

export interface PolicyResponse {
  assistant: AssistantMessage;
  model: string;
  finishReason: string | null;
  usage: Record<string, number> | null;
  tokens: Record<string, unknown> | null;
  /** The prompt ids the server saw, the completion ids and their logprobs; or why there are none. */
  turnTokens?: TurnTokens | MissingTokens;
  /** Token-level mode: the completion as text, before tool calls were parsed out of it. */
  completionText?: string;
  /** Which text parser read the tool calls (token-level mode). */
  toolCallParser?: string;
  /** Token-level mode: why the prompt could not extend the previous turn's ids. */
  promptProblem?: string;
}

export interface PolicyClient {
  next(request: PolicyRequest): Promise<PolicyResponse>;
}
