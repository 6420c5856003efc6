/**
 * The HTTP endpoint a harness run talks to, one per rollout attempt: `<url>/v1` is the
 * OpenAI-compatible API its model calls go to (captured, then forwarded: capturedCall.ts), and
 * `<url>/exec` runs one command in the rollout's sandbox (bridgedCommand.ts). A random path segment
 * keeps other local processes from posing as the harness. For a jailed harness (harnessJail.ts) it
 * listens on a unix socket in the run's scratch directory, and its URLs are the jail's relay on the
 * jail's own loopback; otherwise on this host's loopback.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { JAIL_RELAY_PORT } from './harnessJail.js';

export interface EndpointReply {
  status: number;
  body: unknown;
}

export interface EndpointHandlers {
  chat: (body: Record<string, unknown>) => Promise<EndpointReply>;
  exec: (body: Record<string, unknown>) => Promise<EndpointReply>;
  /** The model name the harness is told to use. */
  model: string;
}

export interface CaptureEndpoint {
  /** Base of the OpenAI-compatible API (…/v1). */
  apiBase: string;
  /** Base of the sandbox bridge (POST …/exec). */
  bridge: string;
  close: () => Promise<void>;
}

const MAX_BODY_BYTES = 64 * 1024 * 1024;

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new Error(`request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('the request body is not a JSON object');
  return parsed as Record<string, unknown>;
}

function send(res: ServerResponse, reply: EndpointReply): void {
  const text = JSON.stringify(reply.body);
  res.writeHead(reply.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const openaiError = (status: number, message: string, type = 'invalid_request_error'): EndpointReply => ({ status, body: { error: { message, type, code: status } } });

export async function startCaptureEndpoint(handlers: EndpointHandlers, where: { socketPath?: string } = {}): Promise<CaptureEndpoint> {
  const token = randomBytes(12).toString('hex');
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0] ?? '';
    const route = path.startsWith(`/${token}/`) ? path.slice(token.length + 1) : undefined;
    const handle = async (): Promise<EndpointReply> => {
      if (route === undefined) return openaiError(404, 'not a rollout capture endpoint');
      if (req.method === 'GET' && route === '/v1/models') return { status: 200, body: { object: 'list', data: [{ id: handlers.model, object: 'model', owned_by: 'rollout-pipeline' }] } };
      if (req.method !== 'POST') return openaiError(405, `${req.method ?? ''} ${route}: only POST is served here`);
      let body: Record<string, unknown>;
      try {
        body = await readJson(req);
      } catch (err) {
        return openaiError(400, `unreadable request: ${(err as Error).message}`);
      }
      if (route === '/v1/chat/completions') return handlers.chat(body);
      if (route === '/exec') return handlers.exec(body);
      return openaiError(404, `${route} is not served: the capture endpoint serves POST /v1/chat/completions (non-streaming) and the sandbox bridge POST /exec`);
    };
    handle().then(
      (reply) => send(res, reply),
      (err: unknown) => send(res, openaiError(500, `capture endpoint: ${err instanceof Error ? err.message : String(err)}`, 'server_error')),
    );
  });
  // A command may run for as long as the rollout's command timeout: no server-side cut of slow requests.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if (where.socketPath) server.listen(where.socketPath, () => resolve());
    else server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = where.socketPath ? JAIL_RELAY_PORT : (server.address() as AddressInfo).port;
  const base = `http://127.0.0.1:${port}/${token}`;
  return {
    apiBase: `${base}/v1`,
    bridge: base,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export { openaiError };
