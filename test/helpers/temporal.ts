/** Connections to the Temporal dev server that `npm test` started (test/run.ts). */
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';

export function testServerAddress(): string {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address) {
    throw new Error('TEMPORAL_ADDRESS is not set: run the tests with `npm test`, which starts a Temporal dev server, or set it to a running server.');
  }
  return address;
}

export async function connectClient(): Promise<{ client: Client; close: () => Promise<void> }> {
  const connection = await Connection.connect({ address: testServerAddress() });
  return { client: new Client({ connection, namespace: 'default' }), close: () => connection.close() };
}

export async function connectWorker(): Promise<NativeConnection> {
  return NativeConnection.connect({ address: testServerAddress() });
}

/** A task queue name no other test uses. */
export function uniqueTaskQueue(prefix: string): string {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}
