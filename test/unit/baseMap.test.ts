/**
 * Which base stands in for a FROM line: python:* images are the Debian release the line names
 * (trixie when none) with CPython of the version it names built from source, as the official
 * image is made; what cannot be made is refused with the fix.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { baseForImage } from '../../images/baseMap.js';
import { CPYTHON_RELEASES, cpythonBuildScript } from '../../images/cpythonSource.js';
import { ubuntuToolchainScript } from '../../images/ubuntuToolchain.js';
import { ClassifiedError } from '../../shared/failures.js';

test('python:3.X-slim-<release> is that release with CPython 3.X from source, whether or not the release ships it', () => {
  const bookworm313 = baseForImage('python:3.13-slim-bookworm', 'Dockerfile:1');
  assert.equal(bookworm313.suite, 'bookworm', 'bookworm as named: its OpenSSL and packages, not trixie\'s');
  assert.deepEqual(bookworm313.cpython, { version: CPYTHON_RELEASES['3.13']?.version, minor: '3.13', sha256: CPYTHON_RELEASES['3.13']?.sha256 });
  assert.ok(bookworm313.env.includes(`PYTHON_VERSION=${CPYTHON_RELEASES['3.13']?.version}`));
  assert.match(bookworm313.substitute, /^Debian bookworm minbase with CPython 3\.13\.\d+ built from source/);

  const bookworm310 = baseForImage('python:3.10-slim-bookworm', 'Dockerfile:1');
  assert.equal(bookworm310.suite, 'bookworm');
  assert.equal(bookworm310.cpython?.minor, '3.10', 'no Debian release ships 3.10: built all the same');

  assert.equal(baseForImage('python:3.11-slim', 'Dockerfile:1').suite, 'trixie', 'no release named: the official default');
  assert.equal(baseForImage('python:3.12', 'Dockerfile:1').cpython?.version, CPYTHON_RELEASES['3.12']?.version);
});

test('without -slim the base has what buildpack-deps gives the official image (compilers, git, curl, -dev libraries)', () => {
  const full = baseForImage('python:3.12-bookworm', 'Dockerfile:1');
  const slim = baseForImage('python:3.12-slim-bookworm', 'Dockerfile:1');
  for (const p of ['gcc', 'g++', 'git', 'curl', 'make', 'libssl-dev', 'libpq-dev']) {
    assert.ok(full.packages.includes(p), p);
    assert.ok(!slim.packages.includes(p), `slim has no ${p}`);
  }
  assert.match(full.substitute, /buildpack-deps/);
});

test('a patch release named in the FROM line is the one built; bullseye is said to be replaced', () => {
  const patch = baseForImage('python:3.12.3-slim-trixie', 'Dockerfile:1');
  assert.equal(patch.cpython?.version, '3.12.3');
  assert.equal(patch.cpython?.sha256, undefined, 'not pinned here: recorded when downloaded');
  const bullseye = baseForImage('python:3.9-slim-bullseye', 'Dockerfile:1');
  assert.equal(bullseye.suite, 'bookworm');
  assert.match(bullseye.substitute, /in place of bullseye/);
});

test('a Python this builder does not make is refused naming the line and the fix', () => {
  assert.throws(
    () => baseForImage('python:3.7-slim', 'task/environment/Dockerfile:3'),
    (err: unknown) => err instanceof ClassifiedError && err.failureClass === 'task' && /task\/environment\/Dockerfile:3: Python 3\.7 is not one this builder makes .*Fix:/.test(err.message),
  );
});

test('debian and ubuntu bases carry no CPython build', () => {
  assert.equal(baseForImage('debian:13.0-slim', 'Dockerfile:1').cpython, undefined);
  assert.equal(baseForImage('ubuntu:24.04', 'Dockerfile:1').cpython, undefined);
});

test("ubuntu:24.04's stand-in makes GCC 13 the compiler apt installs, as Ubuntu's gcc-defaults do; jammy's keeps bookworm's", () => {
  const noble = baseForImage('ubuntu:24.04', 'Dockerfile:1');
  assert.equal(noble.suite, 'trixie');
  assert.equal(noble.customize.length, 1);
  assert.match(noble.substitute, /apt installs GCC 13 as gcc\/g\+\+\/cpp\/gfortran/);
  const script = ubuntuToolchainScript(14, 13);
  assert.match(script, /apt-get download -qq \$packages/);
  assert.match(script, /for p in cpp gcc g\+\+ gfortran; do packages="\$packages \$p \$p-\$triplet"; done/, 'each default with its triplet-named half');
  assert.match(script, /Version: \$version\+rollout\.gcc13/, "a version above trixie's, so apt prefers it and build-essential's (>= 4:14.2) holds");
  assert.match(script, /not the rebuilt \+rollout\.gcc13/, 'the base fails to build if apt would not pick the rebuilt gcc');
  assert.deepEqual(baseForImage('ubuntu:noble', 'Dockerfile:1').customize, noble.customize);
  assert.deepEqual(baseForImage('ubuntu:22.04', 'Dockerfile:1').customize, []);
});

test('the build keeps what the root had installed and purges only its own packages', () => {
  const script = cpythonBuildScript();
  assert.match(script, /manual="\$\(apt-mark showmanual\)"; auto="\$\(apt-mark showauto\)"/);
  assert.match(script, /apt-mark manual \$manual \$auto/);
  assert.match(script, /apt-mark auto \$auto/);
  assert.match(script, /--prefix="\$prefix"/);
  assert.match(script, /apt-get purge -y -qq --auto-remove/);
  // trixie's dpkg-query --search also prints "diversion by libc6 from: ..." lines: only "package: path" lines name packages.
  const lines = 'libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6\ndiversion by libc6 from: /lib64/ld-linux-x86-64.so.2\ndiversion by libc6 to: /lib64/ld-linux-x86-64.so.2.usr-is-merged\nlibssl3t64:amd64: /usr/lib/x86_64-linux-gnu/libssl.so.3\n';
  const awk = /awk '(sub\(":\$", "", \$1\) \{ print \$1 \})'/.exec(script)?.[1];
  assert.ok(awk, 'the package names are read with awk');
  assert.equal(execFileSync('awk', [awk], { input: lines, encoding: 'utf8' }), 'libc6:amd64\nlibssl3t64:amd64\n');
});

test('a ROLLOUT_BASE_MAP rule pins a mutable tag as another image the built-in rules make, named in the identity', () => {
  const dir = mkdtempSync(join(tmpdir(), 'base-map-'));
  try {
    const file = join(dir, 'rules.json');
    writeFileSync(file, JSON.stringify([{ match: '^python:3\\.13(-slim)?-bookworm$', as: 'python:3.13.9$1-bookworm', note: "the tag at Terminal-Bench 2.0's release" }]));
    const env = { ROLLOUT_BASE_MAP: file };
    const pinned = baseForImage('python:3.13-slim-bookworm', 'Dockerfile:1', env);
    assert.equal(pinned.cpython?.version, '3.13.9');
    assert.deepEqual([pinned.suite, pinned.packages], ['bookworm', ['ca-certificates', 'netbase', 'tzdata']]);
    assert.match(pinned.substitute, /^as python:3\.13\.9-slim-bookworm \(ROLLOUT_BASE_MAP rule \^python:.*: the tag at Terminal-Bench 2\.0's release\): Debian bookworm minbase with CPython 3\.13\.9 built from source/);
    assert.equal(baseForImage('python:3.12-slim-bookworm', 'Dockerfile:1', env).cpython?.version, CPYTHON_RELEASES['3.12']?.version, 'other images keep the built-in rules');

    writeFileSync(file, JSON.stringify([{ match: '^python:3\\.13-slim$', as: 'alpine:3.20' }]));
    assert.throws(
      () => baseForImage('python:3.13-slim', 'Dockerfile:1', env),
      (err: unknown) => err instanceof ClassifiedError && /ROLLOUT_BASE_MAP rule .*: python:3\.13-slim as alpine:3\.20, which no built-in rule makes\. Fix:/.test(err.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
