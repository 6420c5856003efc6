/**
 * Sandboxes on images built here: the conformance suite on an image's root
 * filesystem, what only image sandboxes have (the image's WORKDIR and ENV, a
 * writable root that never reaches the cached rootfs), the build cache (a
 * second build is a hit; two builds at once build once), `rollout task check`
 * of a Dockerfile task offline, and TB2's headless-terminal where
 * ../shared/real-tasks is present. Needs scripts/ensure-image-tools.sh
 * (ROLLOUT_IMAGE_TOOLS); skips with that message without it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { removeTaskImage } from '../../images/imageGc.js';
import { imageTools } from '../../images/imageTools.js';
import { ensureTaskImage, imageIdentity, type TaskImage } from '../../images/taskImage.js';
import { shellQuote } from '../../sandboxes/uploadDirectory.js';
import { LocalSandboxProvider } from '../../sandboxes/local/localSandboxProvider.js';
import { checkTask } from '../../client/taskTools/checkTask.js';
import { loadTask } from '../../tasks/loadTask.js';
import { sandboxSpecForTask } from '../../images/sandboxSpecForTask.js';
import type { SandboxSpec } from '../../shared/sandbox.js';
import { sandboxConformanceSuite, type ConformanceTarget } from '../conformance/sandboxConformance.js';
import { hostBait } from '../conformance/hostBait.js';
import { LocalSandboxInspector } from '../helpers/localSandboxInspector.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const fixture = join(root, 'test/fixtures/image-task');
const realTasks = process.env.ROLLOUT_REAL_TASKS ?? resolve(root, '../shared/real-tasks');
const tb2 = join(realTasks, 'terminal-bench-2');
const noTools = process.env.ROLLOUT_IMAGE_TOOLS ? undefined : 'needs image tools: run scripts/ensure-image-tools.sh and export the ROLLOUT_IMAGE_TOOLS it prints';

if (noTools) {
  test('image sandboxes', { skip: noTools }, () => undefined);
} else {
  const scratch = mkdtempSync(join(tmpdir(), 'image-sandbox-test-'));
  const provider = new LocalSandboxProvider({ stateRoot: join(scratch, 'state') });
  const inspector = new LocalSandboxInspector();
  const task = loadTask(fixture);
  let image: TaskImage | undefined;
  const bait = hostBait('image-conformance', scratch);

  const spec = (overrides: Partial<SandboxSpec> = {}): SandboxSpec => {
    if (!image) throw new Error('the fixture image was not built');
    return { ...sandboxSpecForTask(task, { workflowId: 'image-conformance', runId: 'run', attempt: 0 }, {}, false, image), labels: {}, limits: {}, ...overrides };
  };

  before(async () => {
    image = (await ensureTaskImage(task, { log: (line) => process.stderr.write(`${line}\n`) })).image;
    await bait.plant();
  });

  after(async () => {
    await bait.remove();
    rmSync(scratch, { recursive: true, force: true });
  });

  const target = (): ConformanceTarget => ({
    provider,
    spec,
    track: (h) => inspector.track(h),
    leftovers: (h) => inspector.leftovers(h),
    // /home is part of a Debian image (empty), so it is not a host path here; the checkout, the scratch dir and the host's caches are.
    secrets: { files: bait.secretFiles, envValue: bait.secretValue, hostPaths: [root, scratch, '/root/.cache'] },
    hostPorts: [Number(process.env.TEMPORAL_ADDRESS?.split(':')[1] ?? 7233), bait.port()],
  });

  sandboxConformanceSuite('local image', target, {
    notApplicable: {
      'escape: writes outside the workspace': "an image sandbox's root is its own writable overlay, as a container's; that those writes never reach the host or a later sandbox is checked below",
    },
  });

  // Cold, the suite builds two CPython bases and a CPython for the verifier (3.5 min each on two busy cores) before its images.
  describe('image sandboxes', { timeout: 1_800_000 }, () => {
    test("the image's WORKDIR and ENV apply; writes to its root stay in that sandbox, never in the cached rootfs", async () => {
      const { handle } = await provider.provision(spec());
      try {
        const r = await provider.exec(handle, 'pwd; echo "$ROLLOUT_IMAGE_MARKER"; python3 --version; echo planted > /usr/bin/rollout-planted && cat /usr/bin/rollout-planted');
        assert.equal(r.exitCode, 0, r.stderr);
        assert.match(r.stdout, /^\/app\nfrom-the-image\nPython 3\.13\.\d+\nplanted\n$/);
      } finally {
        await provider.teardown(handle);
      }
      assert.equal(existsSync(join(image?.rootfs ?? '/nonexistent', 'usr/bin/rollout-planted')), false, 'the cached rootfs is untouched');
      const { handle: next } = await provider.provision(spec());
      try {
        const r = await provider.exec(next, 'test -e /usr/bin/rollout-planted && echo found || echo absent');
        assert.equal(r.stdout, 'absent\n', 'a later sandbox starts from the image again');
      } finally {
        await provider.teardown(next);
      }
    });

    test("the writable layer is on disk as Docker's: writing more than the memory limit into the image's root fits (page cache, reclaimable) where a tmpfs layer is memory and gets killed; the disk size bounds it; teardown detaches its loop device", async () => {
      const write = 'head -c 400000000 /dev/zero > /opt/blob && sync && stat -c %s /opt/blob';
      const { handle, enforcedLimits } = await provider.provision(spec({ limits: { memoryMb: 128, diskMb: 1024 } }));
      inspector.track(handle);
      try {
        assert.equal(enforcedLimits.disk, 'ext4-file-size');
        const r = await provider.exec(handle, write);
        assert.equal(r.exitCode, 0, `400 MB written under a 128 MB memory limit: ${r.stderr}`);
        assert.equal(r.stdout.trim(), '400000000');
        const full = await provider.exec(handle, 'head -c 800000000 /dev/zero > /opt/more');
        assert.notEqual(full.exitCode, 0);
        assert.match(full.stderr, /No space left on device/, 'past the 1024 MB disk limit');
        assert.equal((await provider.exec(handle, 'rm /opt/blob /opt/more')).exitCode, 0);

        // Its verifier beside it keeps its own /tmp and /root on the same disk layer, outside the agent's overlay.
        const { handle: beside } = await provider.provisionBeside(handle, { labels: { purpose: 'verifier' } });
        try {
          const v = await provider.exec(beside, 'head -c 300000000 /dev/zero > /root/wheels && sync && stat -c %s /root/wheels && stat -c %A /tmp /root');
          assert.equal(v.exitCode, 0, `300 MB in the verifier's /root under a 128 MB memory limit: ${v.stderr}`);
          assert.equal(v.stdout, '300000000\ndrwxrwxrwt\ndrwx------\n');
          assert.equal((await provider.exec(handle, 'test -e /root/wheels && echo seen || echo unseen')).stdout.trim(), 'unseen', "the verifier's /root is not the agent's");
        } finally {
          await provider.teardown(beside);
        }
        const freed = await provider.exec(handle, 'head -c 900000000 /dev/zero > /opt/again && echo fits');
        assert.equal(freed.stdout.trim(), 'fits', "the verifier's files left the layer with it");
      } finally {
        await provider.teardown(handle);
      }
      assert.deepEqual(await inspector.leftovers(handle), { processes: [], mounts: [], directories: [], other: [] }, 'no loop device, mount or directory left');

      // The same write on the old layer: a tmpfs's pages are memory charged to the sandbox, and nothing reclaims them.
      const memoryLayer = new LocalSandboxProvider({ stateRoot: join(scratch, 'state-tmpfs'), writableLayer: 'tmpfs' });
      const tmpfs = await memoryLayer.provision(spec({ limits: { memoryMb: 128, diskMb: 1024 } }));
      try {
        assert.equal(tmpfs.enforcedLimits.disk, 'tmpfs-size');
        const r = await memoryLayer.exec(tmpfs.handle, write);
        assert.notEqual(r.exitCode, 0, 'killed: the install that Docker completes');
      } finally {
        await memoryLayer.teardown(tmpfs.handle);
      }
    });

    test("services an oracle starts get Docker's root capabilities that stay inside: a chroot (sshd's privilege separation) gets no further than the sandbox's root, a port below 1024 binds", async () => {
      const { handle } = await provider.provision(spec());
      try {
        // The classic escape: chroot into a subdirectory holding a descriptor of the old root, then climb.
        const escape = `import os
fd = os.open('/', os.O_RDONLY)
os.makedirs('/tmp/jail', exist_ok=True)
os.chroot('/tmp/jail')
os.fchdir(fd)
for _ in range(64): os.chdir('..')
os.chroot('.')
print(' '.join(sorted(os.listdir('/'))))`;
        const own = `python3 -c "import os; print(' '.join(sorted(os.listdir('/'))))"`;
        const r = await provider.exec(handle, `${own} && python3 -c ${shellQuote(escape)} && python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 22)); print('bound 22')"`);
        assert.equal(r.exitCode, 0, r.stderr);
        const [sandboxRoot = '', listing = '', bound] = r.stdout.trim().split('\n');
        assert.ok(sandboxRoot.split(' ').includes('app'), sandboxRoot);
        assert.equal(listing, sandboxRoot, "climbing out of the chroot ends at the sandbox's own root, not the host's");
        assert.equal(bound, 'bound 22');
      } finally {
        await provider.teardown(handle);
      }
    });

    test("a python:3.X-slim-<release> base is that release with that CPython, as the official image: pip upgrades itself, /usr/local site-packages, the release's own OpenSSL; a Python the image lacks, asked of uv only by tests/.python-version, is uv's managed installation offline (uv python install, uv venv)", async () => {
      const pyTask = loadTask(join(root, 'test/fixtures/python-base-task'));
      // The build itself checks pip and the layout: its RUN steps fail on Debian's packaged pip and dist-packages.
      const built = (await ensureTaskImage(pyTask, { log: (line) => process.stderr.write(`${line}\n`) })).image;
      assert.match(imageIdentity(built), /FROM python:3\.10-slim-bookworm -> Debian bookworm minbase with CPython 3\.10\.\d+ built from source/);
      assert.match(imageIdentity(built), /verifier additions: uv \S+ \(PyPI\); CPython 3\.12\.\d+ at \/opt\/rollout-python\/cpython-3\.12\.\d+-linux-x86_64-gnu; wheels pytest==8\.4\.1/);
      const { handle } = await provider.provision(sandboxSpecForTask(pyTask, { workflowId: 'python-base', runId: '', attempt: 0 }, {}, false, built));
      try {
        const r = await provider.exec(handle, 'cat /app/pip-version.txt; command -v pip; python3 -c "import six; print(six.__file__)"; python --version; cat /app/source-package.txt /app/subject.txt');
        assert.equal(r.exitCode, 0, r.stderr);
        assert.match(r.stdout, /^pip \S+ from \/usr\/local\/lib\/python3\.10\/site-packages\/pip \(python 3\.10\)\n\/usr\/local\/bin\/pip\n\/usr\/local\/lib\/python3\.10\/site-packages\/six\.py\nPython 3\.10\.\d+\n\/tmp\/hello_\S+\.dsc\n/, 'and apt-get source worked once the Dockerfile enabled deb-src in debian.sources');
        assert.match(r.stdout, /\nsubject=CN = example\n$/, "bookworm's OpenSSL 3.0 spaces the subject as the original image does (trixie's 3.5 prints CN=example)");
      } finally {
        await provider.teardown(handle);
      }
      const report = await checkTask(pyTask, provider);
      assert.deepEqual(
        report.cases.map((c) => [c.name, c.reward, c.error]),
        [
          ['untouched start', 0, undefined],
          ['reference solution', 1, undefined],
        ],
        'the tests ran on CPython 3.12 built into the image, found by uv as a managed installation, with no network',
      );
    });

    test("an ubuntu:24.04 base compiles as Ubuntu's GCC 13 does: C that GCC 14 rejects builds in the Dockerfile and in the tests", async () => {
      const ubuntuTask = loadTask(join(root, 'test/fixtures/ubuntu-toolchain-task'));
      // The build itself is the first check: its gcc step fails on trixie's default GCC 14.
      const built = (await ensureTaskImage(ubuntuTask, { log: (line) => process.stderr.write(`${line}\n`) })).image;
      assert.match(imageIdentity(built), /FROM ubuntu:24\.04 -> Debian trixie minbase in place of Ubuntu 24\.04 \(.*apt installs GCC 13 as gcc\/g\+\+\/cpp\/gfortran, as Ubuntu 24\.04 does\)/);
      const { handle } = await provider.provision(sandboxSpecForTask(ubuntuTask, { workflowId: 'ubuntu-toolchain', runId: '', attempt: 0 }, {}, false, built));
      try {
        const r = await provider.exec(handle, "cat /app/gcc-version.txt; for c in cc g++ cpp; do $c -dumpversion; done; /app/legacy; dpkg-query -W -f '${Version}\\n' gcc");
        assert.equal(r.exitCode, 0, r.stderr);
        assert.match(r.stdout, /^13\n13\n13\n13\nlegacy 42\n4:14\.2\.0-1\+rollout\.gcc13\n$/, 'gcc, cc, g++ and cpp are 13; the package says it was rebuilt');
      } finally {
        await provider.teardown(handle);
      }
      const report = await checkTask(ubuntuTask, provider);
      assert.deepEqual(
        report.cases.map((c) => [c.name, c.reward, c.error]),
        [
          ['untouched start', 0, undefined],
          ['reference solution', 1, undefined],
        ],
        "the tests' own cc compiled the file too",
      );
    });

    test('COPY --from a tool image of a registry (ghcr.io/astral-sh/uv): made from its PyPI wheel, its files where the original has them, named in the identity', async () => {
      const toolTask = loadTask(join(root, 'test/fixtures/tool-image-task'));
      const built = (await ensureTaskImage(toolTask, { log: (line) => process.stderr.write(`${line}\n`) })).image;
      assert.match(imageIdentity(built), /COPY --from=ghcr\.io\/astral-sh\/uv:0\.9\.5 -> uv 0\.9\.5 from PyPI/);
      const { handle } = await provider.provision(sandboxSpecForTask(toolTask, { workflowId: 'tool-image', runId: '', attempt: 0 }, {}, false, built));
      try {
        const r = await provider.exec(handle, 'cat /app/uv-version.txt; /bin/uvx --version; ls -l /bin/uv');
        assert.equal(r.exitCode, 0, r.stderr);
        assert.match(r.stdout, /^uv 0\.9\.5\b.*\nuv(x)? 0\.9\.5\b/s, 'the build step ran the copied uv, and uvx came along');
      } finally {
        await provider.teardown(handle);
      }
    });

    test('rollout task check on a Dockerfile task: untouched start 0, reference 1, verified offline with uvx and pinned wheels', async () => {
      const report = await checkTask(task, provider);
      assert.deepEqual(
        report.cases.map((c) => [c.name, c.reward, c.error]),
        [
          ['untouched start', 0, undefined],
          ['reference solution', 1, undefined],
        ],
      );
      assert.match(report.environmentIdentity, /^local:image:sha256:[0-9a-f]{64} built here; FROM environment\/Dockerfile:2: FROM python:3\.13-slim-bookworm -> Debian bookworm minbase with CPython 3\.13\.\d+ built from source/);
      assert.match(report.environmentIdentity, /verifier additions: apt curl; uv 0\.9\.5 \(PyPI\); wheels pytest-json-ctrf==0\.3\.5,pytest==8\.4\.1/);
    });

    test('the second build of the same content is a cache hit; two builds asked for at once build once', async () => {
      const dir = join(scratch, 'cache-task');
      cpSync(fixture, dir, { recursive: true });
      writeFileSync(join(dir, 'environment/Dockerfile'), `FROM python:3.13-slim-bookworm\nWORKDIR /app\nCOPY start.txt /app/start.txt\n# ${randomBytes(8).toString('hex')}\n`);
      writeFileSync(join(dir, 'tests/test.sh'), '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n');
      const variant = loadTask(dir);
      const [a, b] = await Promise.all([ensureTaskImage(variant), ensureTaskImage(variant)]);
      assert.deepEqual([a.cacheHit, b.cacheHit].sort(), [false, true], 'one of them built, the other waited and took its result');
      assert.equal(a.image.imageId, b.image.imageId);
      const again = await ensureTaskImage(variant);
      assert.equal(again.cacheHit, true);
      assert.equal(again.image.imageId, a.image.imageId);
      writeFileSync(join(dir, 'environment/start.txt'), 'changed\n');
      const changed = await ensureTaskImage(loadTask(dir));
      assert.equal(changed.cacheHit, false, 'a changed build context is a new image');
      assert.notEqual(changed.image.key, a.image.key);
      const tools = imageTools();
      for (const made of [a.image, changed.image]) await removeTaskImage(tools, made);
      assert.equal(existsSync(a.image.rootfs), false);
    });

    test('TB2 headless-terminal: its unmodified test.sh scores the untouched start 0 and the oracle 1, offline', { skip: existsSync(join(tb2, 'headless-terminal')) ? false : `${tb2} is absent (set ROLLOUT_REAL_TASKS to the real-tasks folder)` }, async () => {
      const report = await checkTask(loadTask(join(tb2, 'headless-terminal')), provider, { log: (line) => process.stderr.write(`${line}\n`) });
      assert.deepEqual(report.cases.map((c) => [c.name, c.reward]), [['untouched start', 0], ['reference solution', 1]], JSON.stringify(report.cases));
    });
  });
}
