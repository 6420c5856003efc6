/**
 * Which kind of inference server answers at a root, for the sampling fields it
 * takes and what its logprobs mean (samplingRequest.ts). Configured, or probed
 * once per worker process and root: llama.cpp's /props has its
 * default_generation_settings, SGLang answers /get_server_info, vLLM /version;
 * anything else is a generic OpenAI-compatible endpoint. A probe that cannot
 * reach the server is infra (retried), and is not remembered.
 */
import { ApplicationFailure } from '@temporalio/common';
import { failureName } from '../../shared/failures.js';
import type { ServerKind } from '../../shared/tokens.js';

const known = new Map<string, Promise<ServerKind>>();

/** The JSON a GET answers with 200, or undefined for any other status; a network failure throws. */
async function getJson(url: string, timeoutMs: number): Promise<Record<string, unknown> | undefined> {
  let response: Response;
  try {
    response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code;
    throw ApplicationFailure.create({
      type: failureName({ failureClass: 'infra', type: 'policy_unavailable' }),
      message: `policy endpoint ${url} unreachable while finding out what serves it: ${cause ?? (err as Error).name}: ${(err as Error).message}`,
    });
  }
  const text = await response.text().catch(() => '');
  if (response.status !== 200) return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

async function probe(root: string, timeoutMs: number): Promise<ServerKind> {
  const [props, sglang, version] = await Promise.all([getJson(`${root}/props`, timeoutMs), getJson(`${root}/get_server_info`, timeoutMs), getJson(`${root}/version`, timeoutMs)]);
  if (props && typeof props.default_generation_settings === 'object') return 'llama.cpp';
  if (sglang) return 'sglang';
  if (version && typeof version.version === 'string') return 'vllm';
  return 'openai';
}

/** The kind configured, or the one probed at `root` (the server's own endpoints: baseUrl without /v1). */
export function serverKind(configured: 'auto' | ServerKind, root: string, timeoutMs: number): Promise<ServerKind> {
  if (configured !== 'auto') return Promise.resolve(configured);
  let kind = known.get(root);
  if (!kind) {
    kind = probe(root, Math.min(timeoutMs, 10_000));
    known.set(root, kind);
    kind.catch(() => known.delete(root));
  }
  return kind;
}
