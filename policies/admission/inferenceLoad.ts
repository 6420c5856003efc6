/**
 * How loaded an inference server is, read from its own endpoints:
 *   llama.cpp  GET /slots (each slot's is_processing) and GET /metrics (llamacpp:requests_processing,
 *              llamacpp:requests_deferred, llamacpp:kv_cache_usage_ratio; only with --metrics)
 *   vLLM       GET /metrics (vllm:num_requests_running, vllm:num_requests_waiting,
 *              vllm:kv_cache_usage_perc, or vllm:gpu_cache_usage_perc before v0.10; both 0..1)
 *   SGLang     GET /metrics (sglang:num_running_reqs, sglang:num_queue_reqs, sglang:token_usage 0..1)
 * A generic OpenAI-compatible endpoint reports nothing: its load is unknown (null), never guessed.
 */
import type { ServerKind } from '../../shared/tokens.js';

export interface InferenceLoad {
  kind: ServerKind;
  /** Requests the server is generating for now. */
  running: number | null;
  /** Requests it has accepted but queued (no slot, no KV room). */
  waiting: number | null;
  /** llama.cpp's slots: how many are processing, of how many. */
  slots: { busy: number; total: number } | null;
  /** Fraction of the KV cache in use, 0..1. */
  kvCacheUsage: number | null;
  /** The endpoints that answered, e.g. ["/slots", "/metrics"]. */
  sources: string[];
}

/** Sums of each metric's samples in Prometheus text (labels ignored). */
export function prometheusSums(text: string): Map<string, number> {
  const sums = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = /^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const value = Number(match[3]);
    if (!Number.isFinite(value)) continue;
    const name = match[1] as string;
    sums.set(name, (sums.get(name) ?? 0) + value);
  }
  return sums;
}

async function get(url: string, timeoutMs: number): Promise<string | undefined> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await response.text();
    return response.status === 200 ? text : undefined;
  } catch {
    return undefined;
  }
}

const first = (sums: Map<string, number>, ...names: string[]): number | null => {
  for (const name of names) {
    const v = sums.get(name);
    if (v !== undefined) return v;
  }
  return null;
};

/** The server's load now, or null when it reports none (a generic endpoint, metrics disabled, unreachable). */
export async function readInferenceLoad(root: string, kind: ServerKind, timeoutMs = 2_000): Promise<InferenceLoad | null> {
  if (kind === 'openai') return null;
  const load: InferenceLoad = { kind, running: null, waiting: null, slots: null, kvCacheUsage: null, sources: [] };
  if (kind === 'llama.cpp') {
    const [slotsText, metricsText] = await Promise.all([get(`${root}/slots`, timeoutMs), get(`${root}/metrics`, timeoutMs)]);
    if (slotsText !== undefined) {
      try {
        const slots = JSON.parse(slotsText) as { is_processing?: boolean }[];
        if (Array.isArray(slots)) {
          load.slots = { busy: slots.filter((s) => s.is_processing === true).length, total: slots.length };
          load.running = load.slots.busy;
          load.sources.push('/slots');
        }
      } catch {
        // not the slots list: leave it unknown
      }
    }
    if (metricsText !== undefined) {
      const sums = prometheusSums(metricsText);
      load.running = first(sums, 'llamacpp:requests_processing') ?? load.running;
      load.waiting = first(sums, 'llamacpp:requests_deferred');
      load.kvCacheUsage = first(sums, 'llamacpp:kv_cache_usage_ratio');
      load.sources.push('/metrics');
    }
  } else {
    const metricsText = await get(`${root}/metrics`, timeoutMs);
    if (metricsText !== undefined) {
      const sums = prometheusSums(metricsText);
      if (kind === 'vllm') {
        load.running = first(sums, 'vllm:num_requests_running');
        load.waiting = first(sums, 'vllm:num_requests_waiting');
        load.kvCacheUsage = first(sums, 'vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc');
      } else {
        load.running = first(sums, 'sglang:num_running_reqs');
        load.waiting = first(sums, 'sglang:num_queue_reqs');
        load.kvCacheUsage = first(sums, 'sglang:token_usage');
      }
      load.sources.push('/metrics');
    }
  }
  return load.sources.length > 0 ? load : null;
}

/** One line for people: "2/4 slots busy · 0 waiting · KV cache 37%". */
export function describeLoad(load: InferenceLoad | null): string {
  if (!load) return 'load unknown (the server reports none)';
  const parts = [
    load.slots ? `${load.slots.busy}/${load.slots.total} slots busy` : load.running !== null ? `${load.running} running` : undefined,
    load.waiting !== null ? `${load.waiting} waiting` : undefined,
    load.kvCacheUsage !== null ? `KV cache ${Math.round(load.kvCacheUsage * 100)}%` : undefined,
  ];
  return parts.filter(Boolean).join(' · ') || 'load unknown';
}
