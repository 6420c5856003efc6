/** Temporal connection settings from the standard environment variables, and clear errors for bad ones. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { TemporalSettingError, temporalSettings } from '../../workers/temporalConnection.js';

const dir = mkdtempSync(join(tmpdir(), 'temporal-settings-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('a local dev server needs nothing: default address and namespace, plaintext', () => {
  assert.deepEqual(temporalSettings(undefined, {}), { address: '127.0.0.1:7233', namespace: 'default', tls: undefined, apiKey: undefined });
  assert.equal(temporalSettings('flag:1', { TEMPORAL_ADDRESS: 'env:2' }).address, 'flag:1', 'the flag wins over the environment');
});

test('Temporal Cloud with an API key: namespace and key from the environment, TLS on', () => {
  const s = temporalSettings(undefined, { TEMPORAL_ADDRESS: 'ns.acct.tmprl.cloud:7233', TEMPORAL_NAMESPACE: 'ns.acct', TEMPORAL_API_KEY: 'k' });
  assert.deepEqual([s.namespace, s.apiKey, s.tls], ['ns.acct', 'k', {}]);
});

test('mTLS reads the client pair and an optional CA and server name', () => {
  for (const f of ['c.pem', 'k.pem', 'ca.pem']) writeFileSync(join(dir, f), `-----${f}-----\n`);
  const s = temporalSettings(undefined, {
    TEMPORAL_TLS_CLIENT_CERT_PATH: join(dir, 'c.pem'),
    TEMPORAL_TLS_CLIENT_KEY_PATH: join(dir, 'k.pem'),
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: join(dir, 'ca.pem'),
    TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
  });
  assert.equal(s.tls?.clientCertPair?.crt.toString(), '-----c.pem-----\n');
  assert.equal(s.tls?.serverRootCACertificate?.toString(), '-----ca.pem-----\n');
  assert.equal(s.tls?.serverNameOverride, 'temporal.internal');
});

test('half an mTLS pair or an unreadable file is a clear error naming the variable and the fix', () => {
  assert.throws(() => temporalSettings(undefined, { TEMPORAL_TLS_CLIENT_CERT_PATH: join(dir, 'c.pem') }), (e: Error) => e instanceof TemporalSettingError && /set both TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH/.test(e.message));
  assert.throws(
    () => temporalSettings(undefined, { TEMPORAL_TLS_CLIENT_CERT_PATH: join(dir, 'missing.pem'), TEMPORAL_TLS_CLIENT_KEY_PATH: join(dir, 'k.pem') }),
    (e: Error) => e instanceof TemporalSettingError && /TEMPORAL_TLS_CLIENT_CERT_PATH=.*missing\.pem: cannot read it .*Fix: point it at a PEM file/.test(e.message),
  );
});
