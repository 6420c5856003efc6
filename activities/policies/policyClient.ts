/** One step of a policy: given the conversation so far, the next assistant message. */
import type { LoadedTask } from '../../shared/task.js';
import type { AssistantMessage, ChatMessage, ToolSchema } from '../../shared/tools.js';

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
  /** The model's reasoning when the server returns it apart from the content (`reasoning_content`, `reasoning`); kept in the trajectory, never sent back to the model. */
  reasoning?: string;
}

export interface PolicyClient {
  next(request: PolicyRequest): Promise<PolicyResponse>;
}
