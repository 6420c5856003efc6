/** What a public sandbox's routing table keeps out, and the allow list's checks (activities/sandbox/local/userNetwork.ts). */
import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { test } from 'node:test';
import { allowedDestinations, blockedDestinations, routeCommands } from '../../activities/sandbox/local/userNetwork.js';

test('the private, shared and link-local ranges and every address of this host (with its subnet) are blocked', () => {
  const blocked = blockedDestinations();
  for (const range of ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '169.254.0.0/16']) assert.ok(blocked.includes(range), range);
  for (const a of Object.values(networkInterfaces()).flat()) {
    if (!a || a.family !== 'IPv4' || a.internal) continue;
    assert.ok(blocked.includes(`${a.address}/32`), `${a.address} of this host`);
  }
});

test('routes: blocked ones unreachable, allowed ones out through the gateway, slirp’s own network left alone', () => {
  assert.deepEqual(routeCommands(['10.0.0.0/8', '10.0.2.0/24', '192.0.2.2/32'], ['10.1.2.3/32']), [
    'route add unreachable 10.0.0.0/8',
    'route add unreachable 192.0.2.2/32',
    'route add 10.1.2.3/32 via 10.0.2.2 dev tap0',
  ]);
});

test('ROLLOUT_PUBLIC_NETWORK_ALLOW takes IPv4 CIDRs and names a bad entry', () => {
  assert.deepEqual(allowedDestinations(' 10.1.2.3/32, 10.9.0.0/16 '), ['10.1.2.3/32', '10.9.0.0/16']);
  assert.deepEqual(allowedDestinations(''), []);
  assert.throws(() => allowedDestinations('10.1.2.3'), /ROLLOUT_PUBLIC_NETWORK_ALLOW: "10\.1\.2\.3" is not an IPv4 CIDR/);
});
