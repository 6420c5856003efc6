/**
 * The inference server's template and tokenizer endpoints (llama.cpp server:
 * /apply-template, /tokenize, /detokenize), used to know the exact prompt ids
 * a chat completion saw and to build prompts in token-level mode. Endpoint
 * trouble is infra (policy_unavailable, retried); a server without these
 * endpoints (404/405) is remembered per process, so it costs one request.
 */
import { ApplicationFailure } from '@temporalio/common';
import { failureName } from '../../shared/failures.js';
import type { ChatMessage, ToolSchema } from '../../shared/tools.js';

const UNAVAILABLE = failureName({ failureClass: 'infra', type: 'policy_unavailable' });
const OVERFLOW = failureName({ failureClass: 'model', type: 'context_overflow' });

/** The server has no such endpoint: token ids cannot be had this way (not a failure of the call). */
export class EndpointMissing extends Error {
  override readonly name = 'EndpointMissing';
}

const missing = new Map<string, string>();

/** The root of the server's own endpoints: the configured one, else baseUrl without a trailing /v1. */
export function serverRoot(baseUrl: string, serverUrl: string | undefined): string {
  return (serverUrl ?? baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '')).replace(/\/+$/, '');
}

export async function postJson<T>(url: string, body: unknown, options: { timeoutMs: number; headers?: Record<string, string> }): Promise<T> {
  const known = missing.get(url);
  if (known) throw new EndpointMissing(known);
  let response: Response;
  try {
    response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...options.headers }, body: JSON.stringify(body), signal: AbortSignal.timeout(options.timeoutMs) });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code;
    throw ApplicationFailure.create({ type: UNAVAILABLE, message: `policy endpoint ${url} unreachable: ${cause ?? (err as Error).name}: ${(err as Error).message}` });
  }
  const text = await response.text().catch(() => '');
  if (response.status === 404 || response.status === 405 || response.status === 501) {
    const reason = `${url} answered ${response.status}: the server has no such endpoint`;
    missing.set(url, reason);
    throw new EndpointMissing(reason);
  }
  if (response.status === 429 || response.status >= 500) throw ApplicationFailure.create({ type: UNAVAILABLE, message: `policy endpoint ${url} answered ${response.status}: ${text.slice(0, 300)}` });
  if (response.status >= 400) {
    if (/context[_ ]length|maximum context|too many tokens|context window|exceeds the available context/i.test(text)) {
      throw ApplicationFailure.create({ type: OVERFLOW, message: `the conversation no longer fits the model's context: ${text.slice(0, 300)}`, nonRetryable: true });
    }
    throw ApplicationFailure.create({ type: UNAVAILABLE, message: `policy endpoint ${url} rejected the request (${response.status}): ${text.slice(0, 300)}`, nonRetryable: true });
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    throw ApplicationFailure.create({ type: UNAVAILABLE, message: `policy endpoint ${url} sent a response that is not JSON: ${text.slice(0, 200)}` });
  }
}

/** What /props says about the model's special tokens and template, per server root (read once per process). */
export interface ServerProps {
  bosToken: string;
  eosToken: string;
  /** The chat template the server renders with, when it says. */
  chatTemplate?: string;
}
const propsCache = new Map<string, Promise<ServerProps>>();

export class ServerEndpoints {
  constructor(
    readonly root: string,
    private readonly timeoutMs: number,
  ) {}

  /** The prompt text the server's chat template makes of these messages (a trailing assistant message is continued, not closed). */
  async applyTemplate(messages: readonly ChatMessage[], tools: readonly ToolSchema[]): Promise<string> {
    const out = await postJson<{ prompt?: unknown }>(`${this.root}/apply-template`, { messages, tools }, { timeoutMs: this.timeoutMs });
    if (typeof out.prompt !== 'string') throw ApplicationFailure.create({ type: UNAVAILABLE, message: `${this.root}/apply-template sent no prompt string` });
    return out.prompt;
  }

  /** Token ids of a text, special tokens in it parsed as such; addSpecial adds BOS where the model wants one (as the server does for chat). */
  async tokenize(text: string, addSpecial: boolean): Promise<number[]> {
    const out = await postJson<{ tokens?: unknown }>(`${this.root}/tokenize`, { content: text, add_special: addSpecial, parse_special: true }, { timeoutMs: this.timeoutMs });
    if (!Array.isArray(out.tokens) || !out.tokens.every((t) => Number.isInteger(t))) throw ApplicationFailure.create({ type: UNAVAILABLE, message: `${this.root}/tokenize sent no token id array` });
    return out.tokens as number[];
  }

  /** The server's /props (llama.cpp); empty special tokens when it has none. A failed read is not cached. */
  props(): Promise<ServerProps> {
    let known = propsCache.get(this.root);
    if (!known) {
      known = (async () => {
        let response: Response;
        try {
          response = await fetch(`${this.root}/props`, { signal: AbortSignal.timeout(this.timeoutMs) });
        } catch (err) {
          throw ApplicationFailure.create({ type: UNAVAILABLE, message: `${this.root}/props unreachable: ${(err as Error).message}` });
        }
        if (response.status === 404 || response.status === 405) return { bosToken: '', eosToken: '' };
        if (!response.ok) throw ApplicationFailure.create({ type: UNAVAILABLE, message: `${this.root}/props answered ${response.status}` });
        const body = (await response.json().catch(() => ({}))) as { bos_token?: unknown; eos_token?: unknown; chat_template?: unknown };
        const str = (v: unknown): string => (typeof v === 'string' ? v : '');
        return { bosToken: str(body.bos_token), eosToken: str(body.eos_token), ...(typeof body.chat_template === 'string' && body.chat_template !== '' ? { chatTemplate: body.chat_template } : {}) };
      })();
      propsCache.set(this.root, known);
      known.catch(() => propsCache.delete(this.root));
    }
    return known;
  }

  /** The text of token ids, special tokens written out. */
  async detokenize(ids: readonly number[]): Promise<string> {
    const out = await postJson<{ content?: unknown }>(`${this.root}/detokenize`, { tokens: ids }, { timeoutMs: this.timeoutMs });
    if (typeof out.content !== 'string') throw ApplicationFailure.create({ type: UNAVAILABLE, message: `${this.root}/detokenize sent no content string` });
    return out.content;
  }
}
