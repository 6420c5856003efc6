/**
 * A harness process reaches nothing of its host but its capture endpoint. The probe stands for an
 * adapter that runs the model's command where the harness runs instead of through the bridge (a
 * harness bug, a changed `execute`): started exactly as runHarness starts an adapter, it tries a
 * host service on loopback and on the host's address and the Temporal frontend the tests use, writes
 * into a host directory anyone may write, reads a file of the worker's user, and calls its capture
 * endpoint. Needs the harness venvs (scripts/ensure-harnesses.sh); skips with that message without them.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { startCaptureEndpoint } from '../../harnesses/captureEndpoint.js';
import { harnessHome, installedHarness } from '../../harnesses/harnessInstall.js';
import { CAPTURE_SOCKET, handOver, harnessUid } from '../../harnesses/harnessJail.js';
import { startHarnessProcess } from '../../harnesses/harnessProcess.js';

const noHarness = existsSync(join(harnessHome(), 'mini-swe-agent', 'bin', 'python')) ? undefined : 'needs the harness venvs: run scripts/ensure-harnesses.sh';

const hostAddress = (): string => {
  for (const a of Object.values(networkInterfaces()).flat()) if (a && a.family === 'IPv4' && !a.internal) return a.address;
  throw new Error('no non-loopback IPv4 address on this host');
};

test('a harness process reaches only its capture endpoint: no host service, no host file, as a user of its own (all reached on main)', { skip: noHarness }, async () => {
  const nonce = randomBytes(6).toString('hex');
  const runDir = mkdtempSync(join(tmpdir(), 'harness-jail-test-'));
  // A directory of the host anyone may write, and a file only the worker's user may read.
  const open = `/var/tmp/harness-jail-${nonce}`;
  mkdirSync(open);
  chmodSync(open, 0o777);
  const secret = join(harnessHome(), '..', `harness-jail-secret-${nonce}`);
  writeFileSync(secret, 'the worker\'s\n', { mode: 0o600 });
  let connections = 0;
  const service = createServer((s) => {
    connections++;
    s.end();
  });
  await new Promise<void>((r) => service.listen(0, '0.0.0.0', r));
  const port = (service.address() as AddressInfo).port;
  after(() => {
    service.close();
    rmSync(runDir, { recursive: true, force: true });
    rmSync(open, { recursive: true, force: true });
    rmSync(secret, { force: true });
  });

  writeFileSync(
    join(runDir, 'probe.py'),
    `import json, os, socket, subprocess, sys, urllib.request
def tcp(host, port):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        return "OPEN"
    except OSError as e:
        return "CLOSED " + type(e).__name__
    finally:
        s.close()
r = {"uid": os.getuid(), "prefix": sys.prefix, "loopback": tcp("127.0.0.1", ${port}), "address": tcp(${JSON.stringify(hostAddress())}, ${port})}
# The Temporal frontend the tests run against (npm test's dev server), when there is one.
frontend = ${JSON.stringify(process.env.TEMPORAL_ADDRESS ?? '')}
if frontend:
    r["frontend"] = tcp(frontend.rsplit(":", 1)[0], int(frontend.rsplit(":", 1)[1]))
# The model's command, run where the harness runs, as an adapter that forgot the bridge would.
w = subprocess.run(["sh", "-c", "echo pwned > ${open}/pwned"], capture_output=True, text=True)
r["write"] = "WROTE" if w.returncode == 0 else "REFUSED " + w.stderr.strip()[-80:]
r["scratch"] = "WROTE" if subprocess.run(["sh", "-c", "echo ok > scratch.txt"]).returncode == 0 else "REFUSED"
try:
    open(${JSON.stringify(secret)}).read()
    r["secret"] = "READ"
except OSError as e:
    r["secret"] = "REFUSED " + type(e).__name__
models = urllib.request.urlopen(os.environ["ROLLOUT_SANDBOX_BRIDGE"] + "/v1/models", timeout=10).read().decode()
r["endpoint"] = json.loads(models)["data"][0]["id"]
print("PROBE " + json.dumps(r), flush=True)
`,
  );
  const endpoint = await startCaptureEndpoint(
    { model: 'jail-probe', chat: () => Promise.resolve({ status: 500, body: {} }), exec: () => Promise.resolve({ status: 500, body: {} }) },
    { socketPath: join(runDir, CAPTURE_SOCKET) },
  );
  try {
    writeFileSync(join(runDir, 'run.json'), '{}');
    handOver(runDir, harnessUid());
    const child = startHarnessProcess({ ...installedHarness('mini-swe-agent', 'this host'), module: 'probe' }, runDir, join(runDir, 'run.json'), endpoint.bridge);
    const exit = await child.exited;
    const line = child.outputTail().split('\n').find((l) => l.startsWith('PROBE '));
    assert.ok(line, `the probe ran (exit ${exit.code}): ${child.outputTail()}`);
    const r = JSON.parse(line.slice('PROBE '.length)) as Record<string, string | number>;
    assert.equal(r.uid, harnessUid(), 'runs as the harness user, not root');
    assert.equal(r.prefix, join(harnessHome(), 'mini-swe-agent'), "the harness's own venv (its interpreter and packages are in the jail)");
    assert.match(String(r.loopback), /^CLOSED/, "the host's loopback service");
    assert.match(String(r.address), /^CLOSED/, "the host's own address");
    assert.equal(connections, 0, 'the host service saw no connection');
    if (process.env.TEMPORAL_ADDRESS) assert.match(String(r.frontend), /^CLOSED/, `the Temporal frontend at ${process.env.TEMPORAL_ADDRESS}`);
    assert.match(String(r.write), /^REFUSED/, 'a host directory anyone may write');
    assert.ok(!existsSync(join(open, 'pwned')));
    assert.equal(r.scratch, 'WROTE', 'its scratch directory is writable');
    assert.match(String(r.secret), /^REFUSED/, "a file of the worker's user");
    assert.equal(r.endpoint, 'jail-probe', 'the capture endpoint answers');
    assert.equal(exit.code, 0);
  } finally {
    await endpoint.close();
  }
});
