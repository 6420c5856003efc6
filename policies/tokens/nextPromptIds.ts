/**
 * Token-level mode's prompt: turn 0 is the chat template (the server's, or
 * the configured one) of the
 * conversation, tokenized; turn k+1 is exactly turn k's prompt ids + its
 * completion ids + the tokens of what came after (tool results, the next
 * assistant header), so nothing the policy saw or generated is re-rendered.
 *
 * The new messages' text is the template's own: rendered after a fixed probe
 * conversation (system, a user 'u', an assistant 'a') and cut after what the
 * probe alone renders. llama.cpp continues a trailing assistant message, so
 * that cut falls right after 'a' and the text starts with the end-of-turn
 * marker; the policy already generated that marker when its completion ended
 * with it (its last token), so it is not added twice.
 */
import type { TurnTokens } from '../../shared/tokens.js';
import type { ChatMessage, ToolSchema } from '../../shared/tools.js';
import type { ServerEndpoints } from './serverEndpoints.js';

/** Renders messages as the template does, a trailing assistant message continued (the server's /apply-template, or a configured template). */
export type RenderPrompt = (messages: readonly ChatMessage[], tools: readonly ToolSchema[]) => Promise<string>;

export interface NextPrompt {
  ids: number[];
  /** Set when the template could not extend the previous prompt; the ids are then a fresh render (the prefix check records the break). */
  problem?: string;
}

export async function nextPromptIds(
  endpoints: ServerEndpoints,
  render: RenderPrompt,
  messages: readonly ChatMessage[],
  tools: readonly ToolSchema[],
  previous: TurnTokens | null,
): Promise<NextPrompt> {
  const fresh = async (): Promise<number[]> => endpoints.tokenize(await render(messages, tools), true);
  if (!previous) return { ids: await fresh() };
  let last = -1;
  messages.forEach((m, i) => (m.role === 'assistant' ? (last = i) : undefined));
  if (last < 0) return { ids: await fresh(), problem: 'the conversation has no assistant message after a turn with tokens' };
  const added = messages.slice(last + 1);
  const system = messages[0]?.role === 'system' ? [messages[0]] : [];
  const probe: ChatMessage[] = [...system, { role: 'user', content: 'u' }, { role: 'assistant', content: 'a' }];
  const [withAdded, alone] = await Promise.all([render([...probe, ...added], tools), render(probe, tools)]);
  if (!withAdded.startsWith(alone)) {
    return { ids: await fresh(), problem: 'the chat template does not render new messages as a continuation of the conversation (not prefix-stable)' };
  }
  let text = withAdded.slice(alone.length);
  const lastId = previous.completionIds.at(-1);
  if (lastId !== undefined) {
    const lastText = await endpoints.detokenize([lastId]);
    if (lastText !== '' && text.startsWith(lastText)) text = text.slice(lastText.length);
  }
  const addedIds = text === '' ? [] : await endpoints.tokenize(text, false);
  return { ids: [...previous.promptIds, ...previous.completionIds, ...addedIds] };
}
