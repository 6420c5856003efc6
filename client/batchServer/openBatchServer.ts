/**
 * Where a command that reads a batch finds it: the Temporal server asked
 * (--address, else TEMPORAL_ADDRESS, else 127.0.0.1:7233), and, when nothing
 * answers there or it does not have the batch, the embedded run's data
 * directory (--data-dir, default .rollout): the live embedded run's own server
 * if one runs on it, else a headless dev server started on its
 * temporal.sqlite for the command's duration. Either way the command reads
 * the same workflows; one line on stderr says where they came from. A batch
 * found nowhere is an error that names the batches each place has; a server
 * that cannot be reached is one line with the address and the fix.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { startDevServer, type RunningDevServer } from '../../servers/temporalDevServer.js';
import { openTemporalClient, type TemporalSettings } from '../../workers/temporalConnection.js';
import { openClientThroughOutage } from '../outage/openClient.js';
import { liveRun } from '../stopping/embeddedRunMarker.js';
import { batchesOn, hasBatch } from './batchesOn.js';

/** The batch is on no server this command could reach; the message names what each place has. */
export class BatchNotFoundError extends Error {
  override readonly name = 'BatchNotFoundError';
}

/** No Temporal server could be reached, and no embedded run's data to read instead. */
export class NoServerError extends Error {
  override readonly name = 'NoServerError';
}

export interface BatchServer {
  client: Client;
  /** Where the batch was read from, for messages ("the server at 127.0.0.1:7233", "the embedded run's data in ..."). */
  where: string;
  /** True when this command started a dev server on the data directory's SQLite file: no workers serve it. */
  offline: boolean;
  close(): Promise<void>;
}

export interface BatchServerRequest {
  settings: TemporalSettings;
  /** Whether the address was given (flag or TEMPORAL_ADDRESS) rather than the default. */
  addressGiven: boolean;
  dataDir: string;
  /** The batch the command reads; undefined for a command that only needs a server. */
  batchId: string | undefined;
  /** How long to try the server asked before looking elsewhere. */
  connectTimeoutMs?: number;
  /**
   * Wait this long for the server asked when it does not answer and no data directory stands in (a
   * restart, an outage: `rollout status` rides it out, saying so on stderr) instead of failing at once.
   */
  waitForServerMs?: number;
  note?: (line: string) => void;
}

type Opened = Awaited<ReturnType<typeof openTemporalClient>>;

async function tryConnect(settings: TemporalSettings, timeoutMs: number): Promise<Opened | Error> {
  try {
    const opened = await openTemporalClient(settings, { timeoutMs });
    // Connecting is lazy on some paths: one cheap call proves the server answers.
    await opened.connection.workflowService.getSystemInfo({});
    return opened;
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

/** The embedded run's server: the live run's own, or one started on its SQLite file now. */
async function openDataDir(dataDir: string, timeoutMs: number): Promise<{ opened: Opened; server?: RunningDevServer; where: string } | undefined> {
  const sqlite = join(dataDir, 'temporal.sqlite');
  if (!existsSync(sqlite)) return undefined;
  const live = liveRun(dataDir);
  if (live?.address) {
    const opened = await tryConnect({ address: live.address, namespace: 'default', tls: undefined, apiKey: undefined }, timeoutMs);
    if (!(opened instanceof Error)) return { opened, where: `the embedded run in ${dataDir} (pid ${live.process.pid}, its server at ${live.address})` };
  }
  if (live) return undefined; // its server holds the SQLite file: a second one on it would corrupt it
  const server = await startDevServer({ uiPort: false, dbFilename: sqlite, logFile: join(dataDir, 'temporal-dev-server-reader.log') });
  try {
    const opened = await openTemporalClient({ address: server.address, namespace: server.namespace, tls: undefined, apiKey: undefined }, { timeoutMs: 10_000 });
    return { opened, server, where: `the embedded run's data in ${sqlite} (a dev server started for this command)` };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

function closer(opened: Opened, server: RunningDevServer | undefined): () => Promise<void> {
  return async () => {
    await opened.connection.close().catch(() => undefined);
    await server?.stop();
  };
}

function listText(batches: string[]): string {
  if (batches.length === 0) return 'no batches';
  return `batches ${batches.slice(0, 10).join(', ')}${batches.length > 10 ? ` and ${batches.length - 10} more` : ''}`;
}

export async function openBatchServer(request: BatchServerRequest): Promise<BatchServer> {
  const note = request.note ?? ((line: string) => process.stderr.write(`${line}\n`));
  const timeoutMs = request.connectTimeoutMs ?? 3_000;
  const address = request.settings.address;
  let asked: Opened | Error = await tryConnect(request.settings, timeoutMs);
  const fallback = asked instanceof Error && !request.addressGiven ? await openDataDir(request.dataDir, timeoutMs) : undefined;
  if (asked instanceof Error && !fallback && request.waitForServerMs !== undefined) {
    // Nothing stands in: ride out what may be a restart, saying so (a server still down after it is one line).
    const { client, connection, close } = await openClientThroughOutage(request.settings, { maxWaitMs: request.waitForServerMs });
    asked = { client, connection, close };
  }
  if (asked instanceof Error) {
    if (!fallback) {
      throw new NoServerError(
        `no Temporal server answers at ${address} (${asked.message.split('\n')[0]})` +
          `${request.addressGiven ? '' : ` and ${request.dataDir} holds no embedded run (temporal.sqlite)`}. ` +
          "Fix: start the server (`npx rollout server --db-filename .rollout/temporal.sqlite` for an embedded run's data), point --address / TEMPORAL_ADDRESS at the running one, or --data-dir at the embedded run's directory",
      );
    }
    const server: BatchServer = { client: fallback.opened.client, where: fallback.where, offline: fallback.server !== undefined, close: closer(fallback.opened, fallback.server) };
    if (request.batchId !== undefined && !(await hasBatch(server.client, request.batchId))) {
      const there = await batchesOn(server.client);
      await server.close();
      throw new BatchNotFoundError(`no Temporal server answers at ${address}, and batch ${request.batchId} is not in ${fallback.where} either: it has ${listText(there)}`);
    }
    note(`no Temporal server at ${address}: reading from ${fallback.where}`);
    return server;
  }
  const server: BatchServer = { client: asked.client, where: `the server at ${address}`, offline: false, close: closer(asked, undefined) };
  if (request.batchId === undefined || (await hasBatch(asked.client, request.batchId))) return server;
  // The server answers but lacks the batch: another dev server on the default port, say. The data directory may have it.
  const onServer = await batchesOn(asked.client);
  const elsewhere = await openDataDir(request.dataDir, timeoutMs).catch(() => undefined);
  if (elsewhere && (await hasBatch(elsewhere.opened.client, request.batchId))) {
    await server.close();
    note(`batch ${request.batchId} is not on the server at ${address}: reading it from ${elsewhere.where}`);
    return { client: elsewhere.opened.client, where: elsewhere.where, offline: elsewhere.server !== undefined, close: closer(elsewhere.opened, elsewhere.server) };
  }
  const inData = elsewhere ? await batchesOn(elsewhere.opened.client) : undefined;
  if (elsewhere) await closer(elsewhere.opened, elsewhere.server)();
  await server.close();
  throw new BatchNotFoundError(
    `batch ${request.batchId} is not on the server at ${address} (it has ${listText(onServer)})` +
      (inData ? ` nor in ${elsewhere?.where ?? request.dataDir} (it has ${listText(inData)})` : `; ${request.dataDir} holds no embedded run`) +
      '. Fix: check the batch id, or point --address / --data-dir at where it ran',
  );
}
