/**
 * What a policy call tells the server about where it belongs, as the best trainers send it:
 *   - a session key per rollout (its trajectory ref) in the `X-Session-ID` header, so a router in front
 *     of several replicas keeps one rollout on one replica and its prefix cache;
 *   - a prefix-cache salt per policy version, so a new version never reuses the old one's cache:
 *     vLLM's `cache_salt` request field (v0.9+). llama.cpp and SGLang have no such field; it is not
 *     sent there (a strict server would refuse an unknown field) and the turn says so.
 * Each turn records what was sent and whether the server kind is one documented to honour it.
 */
import type { ServerKind } from '../../shared/tokens.js';

export const SESSION_HEADER = 'X-Session-ID';

export interface RequestRouting {
  sessionKey: string;
  sessionHeader: typeof SESSION_HEADER;
  /** The salt sent (vLLM), or null with the reason it was not. */
  cacheSalt: string | null;
  cacheSaltNote: string;
}

export function requestRouting(kind: ServerKind, sessionKey: string, policyVersion: number): { headers: Record<string, string>; body: Record<string, unknown>; routing: RequestRouting } {
  const headers = { [SESSION_HEADER]: sessionKey };
  if (kind === 'vllm') {
    const salt = `policy-v${policyVersion}`;
    return {
      headers,
      body: { cache_salt: salt },
      routing: {
        sessionKey,
        sessionHeader: SESSION_HEADER,
        cacheSalt: salt,
        cacheSaltNote: 'sent as cache_salt; vLLM keeps prefix-cache entries of different salts apart',
      },
    };
  }
  const why = kind === 'openai' ? 'a generic OpenAI-compatible endpoint documents no cache salt' : `${kind} has no per-request prefix-cache salt`;
  return { headers, body: {}, routing: { sessionKey, sessionHeader: SESSION_HEADER, cacheSalt: null, cacheSaltNote: `not sent: ${why}` } };
}
