/**
 * A scripted OpenAI-compatible chat-completions server on 127.0.0.1: the
 * real wire format (tool_calls with JSON-string arguments, usage, logprobs),
 * answers chosen by a script from the conversation so far, a fault injector
 * (status codes, refused connections, a completion that never finishes while
 * the server stays healthy, a server that answers nothing) for the infra
 * tests, a health probe (`GET /v1/models`, `GET /health`), and a per-request
 * delay that stands in for an inference server's latency (benchmarks).
 * Shared by the tests and bench/.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ChatRequest {
  model: string;
  messages: { role: string; content: string | null; tool_calls?: unknown[]; tool_call_id?: string }[];
  tools?: unknown[];
  seed?: number;
  temperature?: number;
  logprobs?: boolean;
  max_tokens?: number;
}

export interface ScriptedReply {
  /** Answer this request with an error instead (e.g. llama.cpp's 400 for a prompt past the context). */
  error?: { status: number; message: string };
  content?: string | null;
  toolCalls?: { name: string; arguments: string | Record<string, unknown> }[];
}

export type Script = (request: ChatRequest, turn: number) => ScriptedReply;

export interface ScriptedServerOptions {
  /** Every answer is sent this long after its request arrived (an inference server's latency). Default 0. */
  delayMs?: number;
  /** Keep every request in `requests` (default true; a benchmark of thousands of requests turns it off). */
  recordRequests?: boolean;
  /**
   * Token ids as vLLM sends them with return_token_ids (prompt_token_ids, choices[0].token_ids, logprobs per id),
   * made by this function from the request and the answer (test/helpers/scriptedTokens.ts); none when absent.
   */
  tokens?: (request: ChatRequest, answer: { content: string | null; toolCalls: { id: string; name: string; arguments: string }[] }) => { promptIds: number[]; completionIds: number[] };
}

export interface ScriptedOpenAIServer {
  baseUrl: string;
  requests: ChatRequest[];
  /** Requests answered (or failed on purpose) so far, and the most that were open at once. */
  stats(): { served: number; inFlight: number; peakInFlight: number };
  /** Starts counting `served` and `peakInFlight` afresh. */
  resetStats(): void;
  setDelayMs(ms: number): void;
  /** The next `count` requests get this status (e.g. 503) instead of an answer. */
  failNext(count: number, status: number, headers?: Record<string, string>): void;
  /**
   * The next request: never gets an answer while the server keeps answering its health probe
   * (`hang`: a generation that runs on), never gets an answer and neither does any request or
   * probe in the SILENT_MS after it arrived (`unresponsive`: a wedged server; a client whose timeout
   * is under 6 s sees both of its 5 s probes go unanswered, and its next retry served), gets 200 with a body that is not JSON, or 200 JSON
   * without choices.
   */
  misbehaveNext(kind: 'hang' | 'unresponsive' | 'not-json' | 'no-choices'): void;
  /** Health probes answered so far. */
  probes(): number;
  /** Stops listening and drops open connections: clients get connection refused until comeBack(). */
  goDown(): Promise<void>;
  /** Listens again on the same port. */
  comeBack(): Promise<void>;
  close(): Promise<void>;
}

/** How long an `unresponsive` server answers nothing, from the request that made it so. */
export const SILENT_MS = 12_000;

async function body(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startScriptedOpenAIServer(script: Script, options: ScriptedServerOptions = {}): Promise<ScriptedOpenAIServer> {
  const requests: ChatRequest[] = [];
  let delayMs = options.delayMs ?? 0;
  const record = options.recordRequests ?? true;
  let served = 0;
  let inFlight = 0;
  let peakInFlight = 0;
  const failures: ({ status: number; headers: Record<string, string> } | { kind: 'hang' | 'unresponsive' | 'not-json' | 'no-choices' })[] = [];
  let counter = 0;
  let probes = 0;
  let silentUntil = 0;
  const silent = (): boolean => Date.now() < silentUntil;
  const server: Server = createServer((req, res) => {
    void (async () => {
      if (req.method === 'GET' && (req.url === '/v1/models' || req.url === '/health')) {
        if (silent()) return; // wedged: the probe gets no answer either
        probes++;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'scripted-model', object: 'model' }] }));
        return;
      }
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
        return;
      }
      const request = JSON.parse(await body(req)) as ChatRequest;
      if (silent()) return;
      if (record) requests.push(request);
      inFlight++;
      peakInFlight = Math.max(peakInFlight, inFlight);
      res.once('close', () => {
        inFlight--;
        served++;
      });
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      const failure = failures.shift();
      if (failure && 'kind' in failure) {
        if (failure.kind === 'hang') return; // the client's own timeout has to end it
        if (failure.kind === 'unresponsive') {
          silentUntil = Date.now() + SILENT_MS;
          return;
        }
        const text = failure.kind === 'not-json' ? '<html>502 bad gateway</html>' : JSON.stringify({ id: 'x', object: 'chat.completion', choices: [] });
        res.writeHead(200, { 'content-type': failure.kind === 'not-json' ? 'text/html' : 'application/json' }).end(text);
        return;
      }
      if (failure) {
        res.writeHead(failure.status, { 'content-type': 'application/json', ...failure.headers }).end(JSON.stringify({ error: { message: 'injected failure' } }));
        return;
      }
      const turn = request.messages.filter((m) => m.role === 'assistant').length;
      const reply = script(request, turn);
      if (reply.error) {
        res.writeHead(reply.error.status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: reply.error.status, message: reply.error.message } }));
        return;
      }
      const toolCalls = (reply.toolCalls ?? []).map((c, i) => ({
        id: `call_${++counter}_${i}`,
        type: 'function',
        function: { name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments) },
      }));
      const ids = options.tokens?.(request, { content: reply.content ?? null, toolCalls: toolCalls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) });
      const completion = {
        id: `chatcmpl-${counter}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: request.model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: reply.content ?? null, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) },
            finish_reason: toolCalls.length > 0 ? 'tool_calls' : 'stop',
            ...(request.logprobs && !ids ? { logprobs: { content: [{ token: 'ok', logprob: -0.01, bytes: [111, 107], top_logprobs: [] }] } } : {}),
            ...(ids ? { token_ids: ids.completionIds, logprobs: { content: ids.completionIds.map((id) => ({ id, token: String.fromCharCode(id), logprob: -0.25, top_logprobs: [] })) } } : {}),
          },
        ],
        ...(ids ? { prompt_token_ids: ids.promptIds } : {}),
        usage: { prompt_tokens: 100 + turn, completion_tokens: 10, total_tokens: 110 + turn },
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion));
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    stats: () => ({ served, inFlight, peakInFlight }),
    resetStats() {
      served = 0;
      peakInFlight = inFlight;
    },
    setDelayMs(ms) {
      delayMs = ms;
    },
    failNext(count, status, headers = {}) {
      for (let i = 0; i < count; i++) failures.push({ status, headers });
    },
    misbehaveNext(kind) {
      failures.push({ kind });
    },
    probes: () => probes,
    goDown: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
    comeBack: () => new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve)),
    close: () =>
      new Promise<void>((resolve) => {
        if (!server.listening) return resolve();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
