/**
 * Which errors from the Temporal client mean "the server is unreachable or
 * not answering right now" (retry: the server may come back) rather than an
 * answer (a failed workflow, a bad request, a missing workflow).
 */
import { ServiceError } from '@temporalio/client';

/** gRPC status codes: UNKNOWN 2, DEADLINE_EXCEEDED 4, RESOURCE_EXHAUSTED 8, ABORTED 10, UNAVAILABLE 14 (INTERNAL 13 only for a broken HTTP/2 stream). */
const TRANSIENT_CODES = new Set<number>([2, 4, 8, 10, 14]);
const INTERNAL = 13;

function grpcCode(err: unknown): number | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'number' && 'details' in err) return err.code;
  return undefined;
}

export function isTransientServerError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    const code = grpcCode(e);
    if (code === INTERNAL) return /RST_STREAM|Call ended without gRPC status/i.test(String((e as { details?: unknown }).details));
    if (code !== undefined) return TRANSIENT_CODES.has(code);
    if (e instanceof Error && /Failed to connect before the deadline|ECONNREFUSED|ECONNRESET|No connection established|Connection dropped/i.test(e.message)) return true;
    if (!(e instanceof ServiceError) && !(e instanceof Error)) return false;
    e = e.cause;
  }
  return false;
}

/** The one-line reason of a transient error, for the waiting notice. */
export function reasonOf(err: unknown): string {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; depth++) {
    const details = (e as { details?: unknown }).details;
    if (typeof details === 'string' && details) return details;
    if (!(e.cause instanceof Error)) return e.message;
    e = e.cause;
  }
  return String(err);
}
