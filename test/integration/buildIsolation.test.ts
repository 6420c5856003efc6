/**
 * A task's Dockerfile is third-party code: its RUN steps run in a network of the build's own
 * (the rules of a `public` sandbox) and within the project's caps, whatever task.toml says.
 * Real podman builds of generated tasks whose RUN steps probe this host's services, run past
 * the time cap, fork past the process cap and allocate past the memory cap.
 * Needs scripts/ensure-image-tools.sh (ROLLOUT_IMAGE_TOOLS); skips with that message without it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { removeTaskImage } from '../../images/imageGc.js';
import { imageTools } from '../../images/imageTools.js';
import { ensureTaskImage, type TaskImage } from '../../images/taskImage.js';
import { loadTask } from '../../tasks/loadTask.js';
import { ClassifiedError, failureName } from '../../shared/failures.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const fixture = join(root, 'test/fixtures/image-task');
const noTools = process.env.ROLLOUT_IMAGE_TOOLS ? undefined : 'needs image tools: run scripts/ensure-image-tools.sh and export the ROLLOUT_IMAGE_TOOLS it prints';
/** The base every image suite shares (built once per cache). */
const FROM = 'FROM python:3.13-slim-bookworm';

/** This host's own non-loopback IPv4 address (what a build on the host's network reaches as itself). */
function hostAddress(): string {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  throw new Error('this host has no non-loopback IPv4 address to probe');
}

/** A TCP service on every host address that counts who connects: a stand-in for the Temporal frontend, the Web UI, PostgreSQL. */
async function hostService(): Promise<{ server: Server; port: number; connections: () => number }> {
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    socket.end('hello from the host\n');
  });
  await new Promise<void>((r) => server.listen(0, '0.0.0.0', r));
  return { server, port: (server.address() as AddressInfo).port, connections: () => connections };
}

if (noTools) {
  test('image build isolation', { skip: noTools }, () => undefined);
} else {
  describe('image builds: a Dockerfile reaches no host service and stays within the caps', () => {
    const scratch = mkdtempSync(join(tmpdir(), 'build-isolation-test-'));
    const built: TaskImage[] = [];
    let service: Awaited<ReturnType<typeof hostService>>;

    /** A task of the fixture's toml and tests with this Dockerfile (and build_timeout_sec, when given). */
    const taskWith = (name: string, dockerfile: string, buildTimeoutSec?: number, testScript?: string): string => {
      const dir = join(scratch, name);
      mkdirSync(join(dir, 'environment'), { recursive: true });
      const toml = readFileSync(join(fixture, 'task.toml'), 'utf8');
      writeFileSync(join(dir, 'task.toml'), buildTimeoutSec === undefined ? toml : toml.replace(/build_timeout_sec = [\d.]+/, `build_timeout_sec = ${buildTimeoutSec}.0`));
      cpSync(join(fixture, 'tests'), join(dir, 'tests'), { recursive: true });
      if (testScript !== undefined) writeFileSync(join(dir, 'tests/test.sh'), testScript);
      writeFileSync(join(dir, 'instruction.md'), 'Nothing to do.\n');
      // A nonce: a fresh build every run, never a cached layer.
      writeFileSync(join(dir, 'environment/Dockerfile'), `${FROM}\nRUN echo ${randomBytes(6).toString('hex')} > /nonce\n${dockerfile}\n`);
      return dir;
    };

    const build = async (dir: string, env: NodeJS.ProcessEnv = process.env) => {
      const result = await ensureTaskImage(loadTask(dir), { log: (line) => process.stderr.write(`${line}\n`), env });
      built.push(result.image);
      return result.image;
    };

    /** The classified failure of a build that must fail. */
    const buildFailure = async (dir: string, env: NodeJS.ProcessEnv): Promise<ClassifiedError> => {
      const err = await build(dir, env).then(() => 'succeeded', (e: unknown) => e);
      assert.ok(err instanceof ClassifiedError, `the build was expected to fail, and it ${err === 'succeeded' ? err : `threw ${err instanceof Error ? err.message : JSON.stringify(err)}`}`);
      return err;
    };

    before(async () => {
      service = await hostService();
    });

    after(async () => {
      service.server.close();
      for (const image of built) await removeTaskImage(imageTools(), image).catch(() => undefined);
      rmSync(scratch, { recursive: true, force: true });
    });

    test("a RUN step reaches neither the host's loopback nor its own address, and still reaches the package registries (both OPEN on main)", async () => {
      const host = hostAddress();
      const probe = (target: string): string => `(timeout 5 bash -c 'exec 3<>/dev/tcp/${target.replace(':', '/')}' 2>/dev/null && echo "${target} OPEN" || echo "${target} CLOSED")`;
      const targets = [`127.0.0.1:${service.port}`, `${host}:${service.port}`, `10.0.2.2:${service.port}`, '169.254.169.254:80'];
      const dir = taskWith('network', `RUN { ${[...targets, 'deb.debian.org:80'].map(probe).join('; ')}; } > /probe.txt; cat /probe.txt`);
      const image = await build(dir);
      const lines = readFileSync(join(image.rootfs, 'probe.txt'), 'utf8').trim().split('\n');
      for (const target of targets) assert.ok(lines.includes(`${target} CLOSED`), `${target} from a RUN step: ${lines.join('; ')}`);
      assert.ok(lines.includes('deb.debian.org:80 OPEN'), `the Debian mirror from a RUN step: ${lines.join('; ')}`);
      assert.equal(service.connections(), 0, "the host's service saw a connection from the build");
      // The build's log names the network it ran in.
      assert.match(readFileSync(image.buildLog, 'utf8'), /network: a namespace of the build's own/);
    });

    test("a RUN step cannot change the build network's routes (it has no CAP_NET_ADMIN)", async () => {
      const dir = taskWith('routes', `RUN apt-get update >/dev/null && apt-get install -y --no-install-recommends iproute2 >/dev/null && (ip route del unreachable 10.0.0.0/8 && echo ROUTE-DELETED || echo ROUTE-KEPT) > /routes.txt`);
      const image = await build(dir);
      assert.equal(readFileSync(join(image.rootfs, 'routes.txt'), 'utf8').trim(), 'ROUTE-KEPT');
    });

    test("the build's time is capped by the project, whatever build_timeout_sec the task sets (no cap on main)", async () => {
      const dir = taskWith('slow', 'RUN sleep 300', 86_400);
      const started = performance.now();
      const err = await buildFailure(dir, { ...process.env, ROLLOUT_BUILD_TIMEOUT_MAX_SEC: '5' });
      assert.equal(failureName(err), 'infra/provision_failed');
      assert.match(err.message, /ran past 5 s: the task's build_timeout_sec = 86400 is capped by ROLLOUT_BUILD_TIMEOUT_MAX_SEC = 5/);
      assert.ok(performance.now() - started < 240_000, 'the build was stopped long before its RUN step would have ended');
    });

    test("the build's processes are capped: a RUN step cannot fork past ROLLOUT_BUILD_PIDS_MAX (no cap on main)", async () => {
      const dir = taskWith('forks', `RUN python3 -c "import subprocess; ps = [subprocess.Popen(['sleep', '3']) for _ in range(300)]; [p.wait() for p in ps]; print('forked 300')"`);
      const err = await buildFailure(dir, { ...process.env, ROLLOUT_BUILD_PIDS_MAX: '64' });
      assert.equal(failureName(err), 'infra/provision_failed');
      assert.match(err.message, /Resource temporarily unavailable/);
      assert.match(err.message, /ROLLOUT_BUILD_PIDS_MAX = 64/);
    });

    test("the build's memory is capped: a RUN step past ROLLOUT_BUILD_MEMORY_MB is killed and named (no cap on main)", async () => {
      const dir = taskWith('memory', `RUN python3 -c "b = b'x' * (1024 << 20); print(len(b))"`);
      const err = await buildFailure(dir, { ...process.env, ROLLOUT_BUILD_MEMORY_MB: '256' });
      assert.equal(failureName(err), 'infra/provision_failed');
      assert.match(err.message, /ran out of memory: the build's cap is 256 MiB \(ROLLOUT_BUILD_MEMORY_MB\)/);
    });

    test("a source-only requirement of the tests is built in a container, never on the host (its setup.py wrote on the host on main)", async () => {
      const nonce = randomBytes(6).toString('hex');
      const version = `1.0.${Number.parseInt(nonce.slice(0, 6), 16)}`; // a new version each run: the wheelhouse is cached by requirement
      const marker = join(tmpdir(), `rollout-sdist-ran-${nonce}`);
      // The package: an sdist only, whose setup.py leaves a file where it runs.
      const pkg = join(scratch, 'pkg', `rollout_sdist_probe-${version}`);
      mkdirSync(pkg, { recursive: true });
      writeFileSync(join(pkg, 'setup.py'), `import pathlib\npathlib.Path(${JSON.stringify(marker)}).write_text('setup.py ran here')\nfrom setuptools import setup\nsetup(name='rollout-sdist-probe', version='${version}', py_modules=[])\n`);
      writeFileSync(join(pkg, 'PKG-INFO'), `Metadata-Version: 2.1\nName: rollout-sdist-probe\nVersion: ${version}\n`);
      const sdist = `rollout_sdist_probe-${version}.tar.gz`;
      const tar = spawnSync('tar', ['-czf', join(scratch, sdist), '-C', join(scratch, 'pkg'), `rollout_sdist_probe-${version}`]);
      assert.equal(tar.status, 0, String(tar.stderr));
      // An index of that one package (PEP 503) on this host's address; setuptools comes from PyPI.
      let downloads = 0;
      const index = createHttpServer((req, res) => {
        if (req.url === '/simple/rollout-sdist-probe/') {
          res.writeHead(200, { 'content-type': 'text/html' }).end(`<a href="/files/${sdist}">${sdist}</a>\n`);
        } else if (req.url === `/files/${sdist}`) {
          downloads++;
          res.writeHead(200, { 'content-type': 'application/gzip' }).end(readFileSync(join(scratch, sdist)));
        } else res.writeHead(404).end();
      });
      await new Promise<void>((r) => index.listen(0, '0.0.0.0', r));
      const url = `http://${hostAddress()}:${(index.address() as AddressInfo).port}/simple`;
      // main's host pip took an index only from its config file; ours is named by ROLLOUT_PIP_EXTRA_INDEX_URL.
      const home = join(scratch, 'home');
      mkdirSync(join(home, '.config/pip'), { recursive: true });
      writeFileSync(join(home, '.config/pip/pip.conf'), `[global]\nextra-index-url = ${url}\ntrusted-host = ${hostAddress()}\n`);
      const allowBefore = process.env.ROLLOUT_PUBLIC_NETWORK_ALLOW;
      process.env.ROLLOUT_PUBLIC_NETWORK_ALLOW = `${hostAddress()}/32`; // the mirror on this host, allowed as an operator would
      try {
        const dir = taskWith('sdist', 'RUN true', undefined, `#!/bin/bash\npip install rollout-sdist-probe==${version}\necho 1 > /logs/verifier/reward.txt\n`);
        const image = await build(dir, { ...process.env, HOME: home, ROLLOUT_PIP_EXTRA_INDEX_URL: url });
        assert.ok(downloads > 0, 'the sdist was fetched from the index');
        assert.ok(!existsSync(marker), `the package's setup.py ran on the host: ${marker}`);
        assert.ok(image.verifier.wheels.includes(`rollout_sdist_probe-${version}-py3-none-any.whl`), image.verifier.wheels.join(', '));
        rmSync(image.verifier.wheelDir, { recursive: true, force: true });
      } finally {
        if (allowBefore === undefined) delete process.env.ROLLOUT_PUBLIC_NETWORK_ALLOW;
        else process.env.ROLLOUT_PUBLIC_NETWORK_ALLOW = allowBefore;
        index.close();
        rmSync(marker, { force: true });
      }
    });

    test("a cache mount whose id climbs out of buildah's cache directory is refused (on main the RUN step saw the host's root)", async () => {
      const dir = taskWith('cache-escape', 'RUN --mount=type=cache,id=../../../../../../..,target=/hostroot ls -a /hostroot > /seen.txt');
      const err = await buildFailure(dir, process.env);
      assert.equal(failureName(err), 'task/invalid_spec');
      assert.match(err.message, /CVE-2024-9675/);
    });

    test("a bind mount through a symbolic link in the context is refused (on main the RUN step saw the host's root)", async () => {
      const dir = taskWith('bind-escape', 'RUN --mount=type=bind,source=hostroot,target=/hostroot ls -a /hostroot > /seen.txt');
      symlinkSync('/', join(dir, 'environment/hostroot'));
      const err = await buildFailure(dir, process.env);
      assert.equal(failureName(err), 'task/invalid_spec');
      assert.match(err.message, /symbolic link .*hostroot.*CVE-2024-1753/);
    });

    test('a cap that is not a positive number is refused by name', async () => {
      const dir = taskWith('bad-cap', 'RUN true');
      const err = await buildFailure(dir, { ...process.env, ROLLOUT_BUILD_MEMORY_MB: 'lots' });
      assert.equal(failureName(err), 'infra/capability_missing');
      assert.match(err.message, /ROLLOUT_BUILD_MEMORY_MB = "lots" is not a positive whole number/);
      assert.ok(!existsSync(join(scratch, 'bad-cap', 'probe.txt')));
    });
  });
}
