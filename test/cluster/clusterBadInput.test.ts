/**
 * What a user gets when the production topology is misconfigured: a missing or wrong server
 * binary, an unreachable PostgreSQL, a namespace that does not exist, a second `up` on a running
 * directory, a shard count that differs from the one the database was created with. Each is one
 * line that names the thing and the fix, exit status 2, never a stack trace.
 */
import assert from 'node:assert/strict';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Connection } from '@temporalio/client';
import { ensureClusterCertificates } from '../../cluster/clusterCertificates.js';
import { LocalTemporalCluster } from '../../cluster/localCluster.js';
import { temporalSettings } from '../../workers/temporalConnection.js';
import { ensureTemporalSchemas, TemporalSchemaError } from '../../cluster/temporalSchema.js';
import { freePort } from '../../servers/temporalDevServer.js';
import { realTemporalServer } from '../helpers/realTemporalServer.js';
import { runRolloutCli } from '../helpers/rolloutCli.js';

const scratch = mkdtempSync(join(tmpdir(), 'cluster-bad-input-'));
// Random 127.79.x.* addresses, so two test runs on one machine do not take each other's.
const octet = 1 + Math.floor(Math.random() * 250);
const prefix = `127.79.${octet}`;
const otherPrefix = `127.79.${(octet % 250) + 1}`;
chmodSync(scratch, 0o755);

const { binaries, skip } = realTemporalServer();

function oneLine(stderr: string): string {
  const lines = stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line, no stack trace:\n${stderr}`);
  return lines[0] ?? '';
}

after(() => rmSync(scratch, { recursive: true, force: true }));

describe('the server binaries', () => {
  test('TEMPORAL_SERVER_DIR without the binaries: names the directory and how to build them', async () => {
    const empty = join(scratch, 'empty');
    mkdirSync(empty);
    const r = await runRolloutCli(['cluster', 'up', '--dir', join(scratch, 'c1')], scratch, { TEMPORAL_SERVER_DIR: empty });
    assert.equal(r.code, 2);
    const line = oneLine(r.stderr);
    assert.match(line, new RegExp(`no executable temporal-server in TEMPORAL_SERVER_DIR=${empty}`));
    assert.match(line, /ensure-temporal-server\.sh/);
  });

  test('a temporal-server that is not the server (here: /bin/false): says it does not run as the server', async () => {
    const wrong = join(scratch, 'wrong');
    mkdirSync(wrong);
    copyFileSync('/bin/false', join(wrong, 'temporal-server'));
    copyFileSync('/bin/false', join(wrong, 'temporal-sql-tool'));
    chmodSync(join(wrong, 'temporal-server'), 0o755);
    chmodSync(join(wrong, 'temporal-sql-tool'), 0o755);
    const r = await runRolloutCli(['cluster', 'up', '--dir', join(scratch, 'c2')], scratch, { TEMPORAL_SERVER_DIR: wrong });
    assert.equal(r.code, 2);
    assert.match(oneLine(r.stderr), /temporal-server does not run as the Temporal server .*ensure-temporal-server\.sh/);
  });
});

describe('a cluster that is misconfigured', { skip }, () => {
  let cluster: LocalTemporalCluster;
  const dir = join(scratch, 'cluster');

  before(async () => {
    // Its namespace is not `default`, which is what workers and clients use unless TEMPORAL_NAMESPACE says otherwise.
    cluster = await LocalTemporalCluster.start({ dir, namespace: 'research', loopbackPrefix: prefix });
  });

  after(async () => {
    await cluster?.destroy();
  });

  test('PostgreSQL unreachable: the schema step names its address', async () => {
    if (!binaries) return;
    const port = await freePort();
    await assert.rejects(ensureTemporalSchemas(binaries.sqlTool, { host: '127.0.0.1', port, user: 'postgres', password: 'unused' }), (err: unknown) => {
      assert.ok(err instanceof TemporalSchemaError);
      assert.match(err.message, new RegExp(`PostgreSQL at 127\\.0\\.0\\.1:${port} is unreachable .*start it or fix the address`));
      return true;
    });
  });

  test('a namespace that does not exist: the worker says which, on which server, and how to create it', async () => {
    const r = await runRolloutCli(['worker', '--address', cluster.frontendAddress, '--data-dir', join(scratch, 'w')], scratch, { TEMPORAL_NAMESPACE: 'nope', ...cluster.clientEnv });
    assert.equal(r.code, 2, r.stderr);
    const line = oneLine(r.stderr);
    assert.match(line, new RegExp(`namespace "nope" does not exist on the Temporal server at ${cluster.frontendAddress.replaceAll('.', '\\.')}`));
    assert.match(line, /temporal operator namespace create/);
  });

  test("a client without the cluster's certificate is refused; with it, it is served (the frontend took any client on 59232e5)", async () => {
    const health = async (options: Parameters<typeof Connection.connect>[0]): Promise<string> => {
      try {
        const connection = await Connection.connect({ connectTimeout: 5_000, ...options });
        try {
          await connection.healthService.check({});
          await connection.workflowService.describeNamespace({ namespace: 'research' });
          return 'SERVED';
        } finally {
          await connection.close();
        }
      } catch (err) {
        return `REFUSED: ${(err as Error).message.split('\n')[0] ?? ''}`;
      }
    };
    const address = cluster.frontendAddress;
    const { tls } = temporalSettings(address, cluster.clientEnv);
    assert.ok(tls?.clientCertPair && tls.serverRootCACertificate);
    assert.match(await health({ address }), /^REFUSED/, 'plaintext');
    assert.match(await health({ address, tls: { serverRootCACertificate: tls.serverRootCACertificate, serverNameOverride: tls.serverNameOverride } }), /^REFUSED/, 'TLS without a client certificate');
    // A certificate of another CA (one made the same way for another directory) is not the cluster's.
    const other = ensureClusterCertificates(join(scratch, 'other-ca'), ['127.0.0.1']);
    const stranger = { crt: readFileSync(other.clientCert), key: readFileSync(other.clientKey) };
    assert.match(await health({ address, tls: { ...tls, clientCertPair: stranger } }), /^REFUSED/, "a client certificate of another CA");
    assert.equal(await health({ address, tls }), 'SERVED', "the cluster's client certificate");
    // The internode ports ask for the certificate too (history here).
    const history = cluster.state().services.find((s) => s.service === 'history')?.address ?? '';
    assert.match(await health({ address: history }), /^REFUSED/, 'plaintext to a history process');
  });

  test('a second `up` on a running directory, and another shard count on an existing one', async () => {
    writeFileSync(join(dir, 'cluster.json'), JSON.stringify({ ...cluster.state(), pid: process.pid }));
    const again = await runRolloutCli(['cluster', 'up', '--dir', dir], scratch);
    assert.equal(again.code, 2);
    assert.match(oneLine(again.stderr), new RegExp(`a cluster already runs from ${dir} \\(pid ${process.pid}.*rollout cluster down --dir ${dir}`));
    rmSync(join(dir, 'cluster.json'));
    const shards = await runRolloutCli(['cluster', 'up', '--dir', dir, '--shards', '16', '--loopback-prefix', otherPrefix], scratch);
    assert.equal(shards.code, 2);
    assert.match(oneLine(shards.stderr), /created with 8 history shards, which never changes; start it with 8 \(--shards 8\)/);
  });
});

