/**
 * A client that rides out its Temporal server: a call that fails because the
 * server is unreachable or not answering is retried with backoff (a long
 * poll is re-attached), and the process says once on stderr that it is
 * waiting, for which server and for what, and once when the server answers
 * again. A watch pings the server's health while results are awaited, so a
 * server that hangs (a stalled process keeps its connections open) is
 * reported too, not only one that refuses.
 */
import { Connection, type Client } from '@temporalio/client';
import { isTransientServerError, reasonOf } from './transientErrors.js';

export interface ServerWait {
  /** Runs `call` until it returns or fails with a non-transient error; `what` names what is waited for. */
  retry<T>(what: string, call: () => Promise<T>, options?: { maxWaitMs?: number; signal?: AbortSignal }): Promise<T>;
  /** Pings the server every few seconds until stopped, reporting an outage and its end. */
  watch(what: string, connection: Connection): () => void;
}

export class ServerUnreachableError extends Error {
  override readonly name = 'ServerUnreachableError';
}

/** The address a client's connection goes to, for messages. */
export function addressOf(client: Client): string {
  return client.connection instanceof Connection ? client.connection.options.address : 'the Temporal server';
}

export function serverWait(address: string, write: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): ServerWait {
  let down: string | undefined;
  const isDown = (what: string, reason: string): void => {
    if (down !== undefined) return;
    down = what;
    write(`waiting for the Temporal server at ${address} (for ${what}): ${reason}; retrying until it answers (Ctrl-C to stop)`);
  };
  const isUp = (): void => {
    if (down === undefined) return;
    down = undefined;
    write(`the Temporal server at ${address} answers again; carrying on`);
  };
  return {
    async retry(what, call, options = {}) {
      const deadline = options.maxWaitMs === undefined ? Infinity : Date.now() + options.maxWaitMs;
      for (let attempt = 0; ; attempt++) {
        try {
          const value = await call();
          isUp();
          return value;
        } catch (err) {
          if (!isTransientServerError(err)) throw err;
          if (Date.now() >= deadline) {
            throw new ServerUnreachableError(
              `the Temporal server at ${address} did not answer for ${Math.round((options.maxWaitMs ?? 0) / 1000)} s (${reasonOf(err)}). Fix: start it, or point --address / TEMPORAL_ADDRESS at the running one`,
            );
          }
          isDown(what, reasonOf(err));
          await new Promise<void>((r) => {
            const timer = setTimeout(done, Math.min(15_000, 500 * 2 ** Math.min(attempt, 5)));
            function done(): void {
              clearTimeout(timer);
              options.signal?.removeEventListener('abort', done);
              r();
            }
            options.signal?.addEventListener('abort', done, { once: true });
          });
          if (options.signal?.aborted) throw new ServerUnreachableError(`stopped (${String(options.signal.reason)}) while waiting for the Temporal server at ${address} (for ${what})`);
        }
      }
    },
    watch(what, connection) {
      let stopped = false;
      let timer: NodeJS.Timeout | undefined;
      // A probe is one attempt, on a connection of its own without the SDK's gRPC retry interceptor:
      // that interceptor re-sends a failed call from a timer, and a re-send after the caller closed
      // its connection throws "Channel has been shut down" where nothing can catch it (the process
      // crashes). The probe's connection is closed with the watch.
      const probe = Connection.lazy({ ...connection.options, interceptors: [] });
      const ping = async (): Promise<void> => {
        try {
          await probe.withDeadline(Date.now() + 5_000, () => probe.healthService.check({}));
          if (!stopped) isUp();
        } catch (err) {
          if (!stopped) isDown(what, reasonOf(err));
        }
        if (!stopped) {
          timer = setTimeout(() => void ping(), 5_000);
          timer.unref();
        }
      };
      timer = setTimeout(() => void ping(), 5_000);
      timer.unref();
      return () => {
        stopped = true;
        clearTimeout(timer);
        void probe.close().catch(() => undefined);
      };
    },
  };
}
