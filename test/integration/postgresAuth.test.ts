/**
 * The cluster's PostgreSQL asks every client for the superuser's password (SCRAM-SHA-256), over
 * TCP and over its unix socket: whoever reaches its address is not its superuser for that alone.
 * On 59232e5 (initdb -A trust) a client with no password was let in and could run
 * `COPY ... TO PROGRAM`, a command on the host as the postgres user.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { PASSWORD_FILE, PostgresServer, postgresBinDir, redactedUrl } from '../../cluster/postgresServer.js';
import { freePort } from '../../servers/temporalDevServer.js';

let noPostgres: string | undefined;
try {
  postgresBinDir();
} catch (err) {
  noPostgres = (err as Error).message;
}

const dir = mkdtempSync(join(tmpdir(), 'rollout-pg-auth-'));
let server: PostgresServer | undefined;

before(async () => {
  if (noPostgres) return;
  server = new PostgresServer({ dir, host: '127.0.0.1', port: await freePort() });
  await server.start();
});
after(async () => {
  await server?.destroy();
});

async function attempt(config: pg.ClientConfig): Promise<string> {
  const client = new pg.Client({ ...config, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    const r = await client.query<{ who: string }>('SELECT current_user AS who');
    return `IN as ${r.rows[0]?.who ?? '?'}`;
  } catch (err) {
    return `REFUSED: ${(err as Error).message}`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

test('a client without the password is refused, over TCP and the unix socket; with it, it is in', { skip: noPostgres }, async () => {
  assert.ok(server);
  const url = new URL(server.url);
  const tcp = { host: url.hostname, port: Number(url.port), user: 'postgres', database: 'postgres' };
  assert.match(await attempt(tcp), /^REFUSED: .*(password|SASL)/i, 'no password over TCP');
  assert.match(await attempt({ ...tcp, password: 'guess' }), /^REFUSED: password authentication failed/, 'a wrong password');
  assert.match(await attempt({ ...tcp, host: dir }), /^REFUSED: .*(password|SASL)/i, 'no password over the unix socket');
  assert.equal(await attempt({ connectionString: server.url }), 'IN as postgres', 'the URL the cluster gives its services');
  // The password is kept for root only, and never printed.
  assert.equal(statSync(join(dir, PASSWORD_FILE)).mode & 0o077, 0);
  assert.ok(!redactedUrl(server.url).includes(server.password));
  assert.match(redactedUrl(server.url), /^postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/postgres$/);
});

test('the password survives a restart of the server on the same data', { skip: noPostgres }, async () => {
  assert.ok(server);
  await server.stop();
  const again = new PostgresServer({ dir, host: '127.0.0.1', port: Number(new URL(server.url).port) });
  assert.equal(again.password, server.password);
  server = again;
  await again.start();
  assert.equal(await attempt({ connectionString: again.url }), 'IN as postgres');
});
