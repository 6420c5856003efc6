/**
 * What an unseen Dockerfile task needs, met by mechanism, not by its spelling.
 *
 * Every tool in a task's image trusts what the host trusts, whatever way it was installed
 * (images/hostTrust.ts): uv copied from its tool image (its own bundled roots) and
 * Python's urllib reach PyPI over HTTPS in a build step and in the sandbox, through this host's
 * egress. Where the egress inspects TLS with a CA of the host's own (/usr/local/share/ca-certificates),
 * the same build with a bundle that lacks that CA fails with uv's UnknownIssuer: the bundle given
 * is what makes it pass. Needs scripts/ensure-image-tools.sh (ROLLOUT_IMAGE_TOOLS) and the network
 * to PyPI; skips with that message without the tools.
 *
 * A service task whose tests install from the index the agent serves (`pip install --index-url
 * http://localhost:8080/simple`, and uv's): the verifier's offline settings must keep PyPI out, not
 * every index (PIP_NO_INDEX and UV_OFFLINE did, and the reference scored 0 in place).
 *
 * A Dockerfile pinning a Debian version the mirror no longer serves: `rollout task check` says the
 * task needs an archive snapshot (snapshot.debian.org, with the fixes) instead of only apt's error.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { HOST_TRUST_BUNDLE_PATH, HOST_TRUST_ENV_NAMES } from '../../images/hostTrust.js';
import { removeTaskImage } from '../../images/imageGc.js';
import { imageTools } from '../../images/imageTools.js';
import { ensureTaskImage, imageIdentity } from '../../images/taskImage.js';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { loadTask } from '../../tasks/loadTask.js';
import { checkTask } from '../../client/taskTools/checkTask.js';
import { sandboxSpecForTask } from '../../images/sandboxSpecForTask.js';
import { ClassifiedError } from '../../shared/failures.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const fixture = join(root, 'test/fixtures/host-trust-task');
const noTools = process.env.ROLLOUT_IMAGE_TOOLS ? undefined : 'needs image tools: run scripts/ensure-image-tools.sh and export the ROLLOUT_IMAGE_TOOLS it prints';
const HOST_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';
const HOST_EXTRA_DIR = '/usr/local/share/ca-certificates';
const hostExtras = existsSync(HOST_EXTRA_DIR) ? readdirSync(HOST_EXTRA_DIR).filter((f) => f.endsWith('.crt')) : [];
const log = (line: string): void => void process.stderr.write(`${line}\n`);

/** PEM blocks of a bundle, normalised (so a CA file and its copy in the bundle compare equal). */
function pemBlocks(text: string): string[] {
  return [...text.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g)].map((m) => m[0].replace(/\s+/g, ''));
}

if (noTools) {
  test('host trust in images', { skip: noTools }, () => undefined);
} else {
  const scratch = mkdtempSync(join(tmpdir(), 'image-host-trust-test-'));
  const provider = new LocalSandboxProvider({ stateRoot: join(scratch, 'state') });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  test("uv from its tool image and Python's urllib reach PyPI over HTTPS in a build step and in the sandbox: each stage gets the host's bundle and every tool's variable for it", async () => {
    const task = loadTask(fixture);
    const { image } = await ensureTaskImage(task, { log });
    assert.match(imageIdentity(image), new RegExp(`host trust: ${HOST_BUNDLE} \\(\\d+ certificates, sha256 [0-9a-f]{16}\\) at ${HOST_TRUST_BUNDLE_PATH}`));
    for (const name of HOST_TRUST_ENV_NAMES) assert.equal(image.env[name], HOST_TRUST_BUNDLE_PATH, `${name} in the image's ENV`);
    const { handle } = await provider.provision(sandboxSpecForTask(task, { workflowId: 'host-trust', runId: '', attempt: 0 }, {}, false, image));
    try {
      const built = await provider.exec(handle, `cat /app/vendored.txt /app/urllib.txt; sha256sum ${HOST_TRUST_BUNDLE_PATH}`);
      assert.equal(built.exitCode, 0, built.stderr);
      assert.match(built.stdout, /^six\.py$/m, 'the build step installed six with the copied uv');
      assert.match(built.stdout, /^urllib ok$/m, "the build step's urllib reached PyPI");
      const hostSha = createHash('sha256').update(readFileSync(HOST_BUNDLE)).digest('hex');
      assert.match(built.stdout, new RegExp(`^${hostSha}  ${HOST_TRUST_BUNDLE_PATH}$`, 'm'), "the bundle in the image is the host's");
      // The agent's side: the same tool, at run time, in the sandbox's public network.
      const agent = await provider.exec(handle, 'uv pip install --system --no-deps --target /tmp/agent-vendor six==1.16.0 && ls /tmp/agent-vendor', { timeoutMs: 120_000 });
      assert.equal(agent.exitCode, 0, `${agent.stdout}\n${agent.stderr}`);
      assert.match(agent.stdout, /^six\.py$/m);
    } finally {
      await provider.teardown(handle);
      await removeTaskImage(imageTools(), image);
    }
  });

  test(
    "the bundle is what makes it pass: without the host's own CA in it, the copied uv fails with UnknownIssuer",
    { skip: hostExtras.length > 0 ? false : `${HOST_EXTRA_DIR} holds no CA of the host's own: this host's egress is not TLS-inspected, so any public bundle passes` },
    async () => {
      const own = new Set(hostExtras.flatMap((f) => pemBlocks(readFileSync(join(HOST_EXTRA_DIR, f), 'utf8'))));
      const host = readFileSync(HOST_BUNDLE, 'utf8');
      const publicOnly = [...host.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g)].map((m) => m[0]).filter((pem) => !own.has(pem.replace(/\s+/g, '')));
      assert.ok(publicOnly.length > 0 && publicOnly.length < pemBlocks(host).length, "the host's bundle holds its own CA beside public roots");
      const bundle = join(scratch, 'public-only.pem');
      writeFileSync(bundle, `${publicOnly.join('\n')}\n`);
      // A copy of the task: the same Dockerfile, under another name so its image is its own.
      const dir = join(scratch, 'public-only-task');
      cpSync(fixture, dir, { recursive: true });
      await assert.rejects(ensureTaskImage(loadTask(dir), { log, env: { ...process.env, ROLLOUT_IMAGE_CA_BUNDLE: bundle } }), (err: unknown) => {
        assert.ok(err instanceof ClassifiedError, String(err));
        assert.match(err.message, /invalid peer certificate: UnknownIssuer/);
        return true;
      });
    },
  );

  test('ROLLOUT_IMAGE_CA_BUNDLE naming no file, or a file without certificates, is refused by name', async () => {
    const task = loadTask(fixture);
    await assert.rejects(ensureTaskImage(task, { env: { ...process.env, ROLLOUT_IMAGE_CA_BUNDLE: join(scratch, 'absent.pem') } }), /ROLLOUT_IMAGE_CA_BUNDLE=.*absent\.pem: no such file\. Fix: /);
    const empty = join(scratch, 'empty.pem');
    writeFileSync(empty, 'not a certificate\n');
    await assert.rejects(ensureTaskImage(task, { env: { ...process.env, ROLLOUT_IMAGE_CA_BUNDLE: empty } }), /empty\.pem: holds no PEM certificate.*Fix: set ROLLOUT_IMAGE_CA_BUNDLE/);
  });

  test("a Dockerfile pinning a Debian version the mirror no longer serves: task check names the need (an archive snapshot) and the fixes, not a broken task", async () => {
    const report = await checkTask(loadTask(join(root, 'test/fixtures/debian-pin-task')), provider, { log });
    assert.equal(report.passed, false);
    assert.deepEqual(report.needsInternet, { hosts: ['snapshot.debian.org'], stage: 'build' }, report.environmentError);
    assert.match(report.environmentError ?? '', /apt pins dpkg-dev=1\.22\.21, versions Debian bookworm's mirror no longer serves/);
    assert.match(report.environmentError ?? '', /Fix: point ROLLOUT_DEBIAN_MIRROR at an archive snapshot/);
  });

  test("a service task's tests install from the index its solution serves on localhost, with pip and with uv: reference 1, untouched start 0, in place", async () => {
    const report = await checkTask(loadTask(join(root, 'test/fixtures/local-index-task')), provider, { log });
    assert.deepEqual(
      report.cases.map((c) => [c.name, c.reward]),
      [
        ['untouched start', 0],
        ['reference solution', 1],
      ],
      JSON.stringify(report.cases.map((c) => c.outputTail)),
    );
    assert.equal(report.verifyMode, 'in-place');
  });

  test("a build step's `uv run script.py` on a base without Python gets the Python the script's metadata asks for: Docker's uv would download one from github.com", async () => {
    const task = loadTask(join(root, 'test/fixtures/uv-build-task'));
    const report = await checkTask(task, provider);
    assert.deepEqual(
      report.cases.map((c) => [c.name, c.reward]),
      [
        ['untouched start', 0],
        ['reference solution', 1],
      ],
      JSON.stringify(report.cases).slice(0, 2000),
    );
  });
}
