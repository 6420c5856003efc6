/** One step of a policy: given the conversation so far, the next assistant message. */
import type { LoadedTask } from '../shared/task.js';
import type { MissingTokens, TurnTokens } from '../shared/tokens.js';
import type { AssistantMessage, ChatMessage, ToolCallParserName, ToolSchema } from '../shared/tools.js';
import type { AdmittedCall } from './admission/admitCall.js';
import type { RequestRouting } from './routing/requestRouting.js';

export interface PolicyRequest {
  messages: ChatMessage[];
  tools: readonly ToolSchema[];
  task: LoadedTask;
  rolloutIndex: number;
  attempt: number;
  turn: number;
  /** The previous turn's token ids in this attempt (token-level mode extends them). */
  previousTokens?: TurnTokens | null;
  /** The rollout's key for a router (its trajectory ref): one rollout, one replica (routing/requestRouting.ts). */
  sessionKey?: string;
  /** The policy version of this turn (the prefix-cache salt). */
  policyVersion?: number;
}

export interface PolicyResponse {
  assistant: AssistantMessage;
  model: string;
  finishReason: string | null;
  usage: Record<string, number> | null;
  /**
   * Token fields as the server sent them (logprobs, token_ids, prompt_token_ids), kept only when
   * no turnTokens is recorded (tokens.mode off). Records written before 2026-12-01 carry them
   * beside turnTokens too (the same data twice); read ids through turnTokensOf (tokens/turnTokensOf.ts).
   */
  tokens?: Record<string, unknown> | null;
  /** The model's reasoning when the server returns it apart from the content (`reasoning_content`, `reasoning`); kept in the trajectory, never sent back to the model. */
  reasoning?: string;
  /** The prompt ids the server saw, the completion ids and their logprobs; or why there are none. */
  turnTokens?: TurnTokens | MissingTokens;
  /** Token-level mode: why the prompt could not extend the previous turn's ids. */
  promptProblem?: string;
  /** Which parser read each of `assistant.tool_calls` (openai policy; toolCallParsing/). */
  toolCallParsers?: ToolCallParserName[];
  /** The content as the model wrote it, when a text parser took tool calls out of it. */
  rawContent?: string;
  /** The session key and prefix-cache salt sent with the call, and what the server kind does with them. */
  routing?: RequestRouting;
}

export interface PolicyClient {
  next(request: PolicyRequest): Promise<PolicyResponse>;
  /** Waits until the server has room for a call (admission/); release() when it is answered. Absent: no gate. */
  admit?(signal?: AbortSignal): Promise<AdmittedCall>;
}
