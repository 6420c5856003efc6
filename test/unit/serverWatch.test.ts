/**
 * The outage watch of a waiting client (client/outage/serverWait.ts) against a server that is not
 * there: it says once that it waits, and once stopped it leaves nothing behind. A trainer that rode
 * out an outage through `results()` and then closes its connection must not crash: the SDK's gRPC
 * retry interceptor re-sends a failed call from a timer, and a re-send on a closed connection throws
 * "Channel has been shut down" where nobody can catch it (an uncaughtException).
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { serverWait } from '../../client/outage/serverWait.js';

/** A loopback port nothing listens on (taken, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((res) => server.close(() => res()));
  return port;
}

test('the outage watch says it waits, and once stopped leaves no retry that outlives the connection', async () => {
  const address = `127.0.0.1:${await closedPort()}`;
  const connection = Connection.lazy({ address });
  const lines: string[] = [];
  const crashes: unknown[] = [];
  const onCrash = (err: unknown): void => void crashes.push(err);
  process.on('uncaughtException', onCrash);
  try {
    const stop = serverWait(address, (line) => lines.push(line)).watch('the results of a batch', connection);
    await sleep(7_000); // the first ping goes at 5 s, fails, and is being retried
    stop();
    await connection.close();
    await sleep(10_000); // longer than the SDK's retry backoff
  } finally {
    process.off('uncaughtException', onCrash);
  }
  assert.deepEqual(crashes.map(String), [], 'nothing thrown after the connection closed');
  assert.equal(lines.length, 1, lines.join('\n'));
  assert.match(lines[0] ?? '', new RegExp(`waiting for the Temporal server at ${address} \\(for the results of a batch\\)`));
});
