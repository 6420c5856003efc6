/**
 * A cheap health probe of an OpenAI-compatible server, asked when a policy
 * call ran past its time: `GET {baseUrl}/models` (vLLM, SGLang, llama.cpp,
 * providers), then llama.cpp's and vLLM's `GET /health`. Only a 2xx answer is
 * evidence of a healthy server; a refusal, an error status or silence is not.
 */
export interface ProbeResult {
  healthy: boolean;
  /** What answered (or did not), for the failure message. */
  evidence: string;
}

const PROBE_TIMEOUT_MS = 5_000;

async function get(url: string, headers: Record<string, string>): Promise<string | number> {
  try {
    const res = await fetch(url, { headers, signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    await res.body?.cancel();
    return res.status;
  } catch (err) {
    const e = err as { name?: string; cause?: { code?: string } };
    return e.name === 'TimeoutError' ? `no answer in ${PROBE_TIMEOUT_MS / 1000} s` : (e.cause?.code ?? e.name ?? 'error');
  }
}

export async function probeEndpoint(baseUrl: string, headers: Record<string, string> = {}): Promise<ProbeResult> {
  const base = baseUrl.replace(/\/+$/, '');
  const tried: string[] = [];
  for (const url of [`${base}/models`, `${new URL(base).origin}/health`]) {
    const status = await get(url, headers);
    if (typeof status === 'number' && status >= 200 && status < 300) return { healthy: true, evidence: `GET ${url} answered ${status}` };
    tried.push(`GET ${url}: ${status}`);
  }
  return { healthy: false, evidence: tried.join('; ') };
}
