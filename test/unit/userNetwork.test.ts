/** What a public sandbox's routing table keeps out, and the allow list's checks (sandboxes/local/userNetwork.ts). */
import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { test } from 'node:test';
import { allowedDestinations, blockedDestinations, routeCommands, SLIRP_NETWORK_BLOCKED } from '../../sandboxes/local/userNetwork.js';

test('the private, shared and link-local ranges and every address of this host (with its subnet) are blocked', () => {
  const blocked = blockedDestinations();
  for (const range of ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '169.254.0.0/16']) assert.ok(blocked.includes(range), range);
  for (const a of Object.values(networkInterfaces()).flat()) {
    if (!a || a.family !== 'IPv4' || a.internal) continue;
    assert.ok(blocked.includes(`${a.address}/32`), `${a.address} of this host`);
  }
});

test('routes: blocked ones unreachable, allowed ones out through the gateway, of slirp’s own network only its gateway and DNS forwarder', () => {
  assert.deepEqual(routeCommands(['10.0.0.0/8', '10.0.2.0/24', '192.0.2.2/32'], ['10.1.2.3/32']), [
    'route add unreachable 10.0.0.0/8',
    'route add unreachable 192.0.2.2/32',
    ...['10.0.2.0/31', '10.0.2.4/30', '10.0.2.8/29', '10.0.2.16/28', '10.0.2.32/27', '10.0.2.64/26', '10.0.2.128/25'].map((c) => `route add unreachable ${c}`),
    'route add 10.1.2.3/32 via 10.0.2.2 dev tap0',
  ]);
  // Allowing exactly a blocked prefix (a mirror on this host's own address) routes it out instead of failing on a duplicate route.
  const allowedHost = routeCommands(['10.0.0.0/8', '192.0.2.2/32'], ['192.0.2.2/32']);
  assert.ok(!allowedHost.includes('route add unreachable 192.0.2.2/32'));
  assert.ok(allowedHost.includes('route add 192.0.2.2/32 via 10.0.2.2 dev tap0'));
  // The blocks cover every 10.0.2.x but .2 and .3 exactly once.
  const covered = new Map<number, number>();
  for (const c of SLIRP_NETWORK_BLOCKED) {
    const [a = '', bits = '32'] = c.split('/');
    const start = Number(a.split('.')[3]);
    for (let i = start; i < start + 2 ** (32 - Number(bits)); i++) covered.set(i, (covered.get(i) ?? 0) + 1);
  }
  for (let i = 0; i < 256; i++) assert.equal(covered.get(i) ?? 0, i === 2 || i === 3 ? 0 : 1, `10.0.2.${i}`);
  assert.ok(blockedDestinations().includes('168.63.129.16/32'), "Azure's host endpoint");
});

test('ROLLOUT_PUBLIC_NETWORK_ALLOW takes IPv4 CIDRs and names a bad entry', () => {
  assert.deepEqual(allowedDestinations(' 10.1.2.3/32, 10.9.0.0/16 '), ['10.1.2.3/32', '10.9.0.0/16']);
  assert.deepEqual(allowedDestinations(''), []);
  assert.throws(() => allowedDestinations('10.1.2.3'), /ROLLOUT_PUBLIC_NETWORK_ALLOW: "10\.1\.2\.3" is not an IPv4 CIDR/);
});
