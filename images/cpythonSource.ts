/**
 * CPython built from its own source, as the official python image builds it
 * (docker-library/python: configure, make, make install into a prefix, the
 * tests and bytecode removed, only the runtime libraries kept), so a
 * `python:3.X[-slim]-<release>` base is that Debian release with that Python,
 * whether or not the release ships it (python:3.13-slim-bookworm: bookworm's
 * OpenSSL, gcc and packages, Python 3.13), and a test's `uvx -p 3.X` finds the
 * interpreter uv would otherwise download.
 *
 * The source comes from a package registry this machine reaches: the Go module
 * proxy serves every tag of github.com/python/cpython as a module zip
 * (`v3.13.15+incompatible`), immutable and checked by Go's checksum database.
 * The newest patch release of each minor is pinned here with the zip's sha256;
 * a FROM line that names a patch release gets that one (its hash is recorded).
 * Built without PGO and LTO (the official image uses both: its Python runs some
 * 10-20% faster; a PGO build would take most of an hour on two cores).
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClassifiedError } from '../shared/failures.js';
import { withBuildStorage } from './buildStorage.js';
import { withFileLock } from './fileLock.js';
import { imageExists, runTool, runToolOk, type ImageTools } from './imageTools.js';
import { pipPython } from './wheelhouse.js';

/** The newest patch release of each minor on the proxy (2026-12-03) and its module zip's sha256. */
export const CPYTHON_RELEASES: Readonly<Record<string, { version: string; sha256: string }>> = {
  '3.9': { version: '3.9.25', sha256: '81c182af198112b39db723019af4e560b0fae011b08fb44cf0dc98209902313f' },
  '3.10': { version: '3.10.21', sha256: 'ef19ef446f6fe5f5ef1d63090f52486fd8af44ffd9b8f3a33392234ad43c1b96' },
  '3.11': { version: '3.11.16', sha256: '062952d627f06c95c1e3c1e69b4ef7b6ec751ed0e27c416be6bcbe839e3b7ad3' },
  '3.12': { version: '3.12.14', sha256: '1eb4c63c935290583758ea4a4d46e07bba6f192a8569f34854149b5c9da68b9d' },
  '3.13': { version: '3.13.15', sha256: '4743a2e9556a8e30ed8d21c8db799efeae432ac4bc6635cc60dc12094a8750e0' },
  '3.14': { version: '3.14.7', sha256: 'e79b1270b4b62593f6686c8db8edd384b4a9b14e5824a8c9fce0a95656dd6321' },
};

export interface CpythonRelease {
  /** 3.13.15 */
  version: string;
  /** 3.13 */
  minor: string;
  /** The module zip's sha256 when pinned here; a named patch release is recorded after download. */
  sha256?: string;
}

/** The release a `3.X` or `3.X.Y` asks for, or an error naming what is known. */
export function cpythonRelease(spec: string, where: string): CpythonRelease {
  const m = /^(3\.\d+)(?:\.(\d+))?$/.exec(spec);
  const pinned = m ? CPYTHON_RELEASES[m[1] as string] : undefined;
  if (!m || (!pinned && m[2] === undefined)) {
    throw new ClassifiedError(
      'task',
      'invalid_spec',
      `${where}: Python ${spec} is not one this builder makes (minors ${Object.keys(CPYTHON_RELEASES).join(', ')}, or a patch release 3.X.Y). Fix: name one of those, or add a rule to ROLLOUT_BASE_MAP`,
    );
  }
  const minor = m[1] as string;
  if (m[2] === undefined || (pinned && pinned.version === spec)) return { version: (pinned as { version: string }).version, minor, sha256: (pinned as { sha256: string }).sha256 };
  return { version: spec, minor };
}

export function cpythonProxy(env: NodeJS.ProcessEnv = process.env): string {
  return (env.ROLLOUT_GO_PROXY ?? 'https://proxy.golang.org').replace(/\/+$/, '');
}

/** Debian's names of what CPython's configure looks for (the official image's list; present in bookworm and trixie). */
const BUILD_PACKAGES = [
  'dpkg-dev',
  'gcc',
  'libbz2-dev',
  'libc6-dev',
  'libdb-dev',
  'libffi-dev',
  'libgdbm-dev',
  'liblzma-dev',
  'libncurses-dev',
  'libreadline-dev',
  'libsqlite3-dev',
  'libssl-dev',
  'make',
  'tk-dev',
  'uuid-dev',
  'xz-utils',
  'zlib1g-dev',
];

/**
 * The build, run as root inside the root it installs into with the source at /usr/src/python: $1 is the
 * prefix. Every package the root had stays, with its manual/auto mark; the build's own packages are
 * purged and only the libraries the installed Python links are kept (the official image's apt-mark
 * dance, with Suggests not keeping gcc: bookworm's apt suggests dpkg-dev).
 */
export function cpythonBuildScript(): string {
  return `#!/bin/sh
# Written by rollout-pipeline: CPython from source as docker-library/python builds it (no PGO/LTO).
set -eu
prefix="$1"
export DEBIAN_FRONTEND=noninteractive
manual="$(apt-mark showmanual)"; auto="$(apt-mark showauto)"
lists="$(find /var/lib/apt/lists -maxdepth 1 -type f ! -name lock | wc -l)"
apt-get update -qq
apt-get install -y -qq --no-install-recommends ${BUILD_PACKAGES.join(' ')} >/dev/null
cd /usr/src/python
arch="$(dpkg-architecture --query DEB_BUILD_GNU_TYPE)"
ldflags="-Wl,--strip-all"; [ "$prefix" = /usr/local ] || ldflags="$ldflags -Wl,-rpath=$prefix/lib"
sh ./configure --build="$arch" --prefix="$prefix" --enable-loadable-sqlite-extensions --enable-shared --with-ensurepip=install LDFLAGS="$ldflags" > /tmp/cpython-configure.log 2>&1 || { tail -n 40 /tmp/cpython-configure.log; exit 1; }
make -j "$(nproc)" > /tmp/cpython-make.log 2>&1 || { tail -n 60 /tmp/cpython-make.log; exit 1; }
make install > /tmp/cpython-install.log 2>&1 || { tail -n 60 /tmp/cpython-install.log; exit 1; }
cd /; rm -rf /usr/src/python /tmp/cpython-*.log
find "$prefix" -depth \\( \\( -type d -a \\( -name test -o -name tests -o -name idle_test \\) \\) -o \\( -type f -a \\( -name '*.pyc' -o -name '*.pyo' -o -name 'libpython*.a' \\) \\) \\) -exec rm -rf '{}' +
ldconfig
# Everything the root had stays (marked manual for the purge, its marks put back after); the build's own packages go.
# The packages of the libraries Python links: dpkg-query's "package: path" lines only (trixie also prints "diversion by ..." lines).
apt-mark auto '.*' > /dev/null
[ -z "$manual$auto" ] || apt-mark manual $manual $auto > /dev/null
runtime="$(find "$prefix" -type f -executable -not -name '*tkinter*' -exec ldd '{}' ';' 2>/dev/null | awk '/=>/ { so = $(NF-1); if (index(so, "'"$prefix"'/") == 1) next; gsub("^/(usr/)?", "", so); printf "*%s\\n", so }' | sort -u | xargs -r dpkg-query --search 2>/dev/null | awk 'sub(":$", "", $1) { print $1 }' | sort -u)"
[ -z "$runtime" ] || apt-mark manual $runtime > /dev/null
apt-get purge -y -qq --auto-remove -o APT::AutoRemove::RecommendsImportant=false -o APT::AutoRemove::SuggestsImportant=false > /dev/null
# The libraries Python links stay manual, as in the official image (an autoremove later must not take them).
[ -z "$auto" ] || apt-mark auto $auto > /dev/null
[ -z "$runtime" ] || apt-mark manual $runtime > /dev/null
[ "$lists" != 0 ] || rm -rf /var/lib/apt/lists/*
for name in idle3 pip3 pydoc3 python3 python3-config; do short="$(echo "$name" | tr -d 3)"; [ -e "$prefix/bin/$short" ] || ln -s "$name" "$prefix/bin/$short"; done
"$prefix/bin/python3" -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, readline, uuid, decimal, sys; print("built Python", sys.version.split()[0], "with", ssl.OPENSSL_VERSION)'
"$prefix/bin/pip3" --version
`;
}

export interface CpythonSource {
  release: CpythonRelease & { sha256: string };
  /** The extracted tree, with build-cpython.sh beside configure. */
  dir: string;
  url: string;
}

/** Downloads (once) and extracts a release's source into the image cache; checks the pinned hash. */
export async function ensureCpythonSource(tools: ImageTools, release: CpythonRelease, env: NodeJS.ProcessEnv = process.env, log: (line: string) => void = () => undefined): Promise<CpythonSource> {
  const url = `${cpythonProxy(env)}/github.com/python/cpython/@v/v${release.version}+incompatible.zip`;
  const root = join(tools.cacheDir, 'cpython');
  const dir = join(root, release.version);
  const done = join(dir, '.sha256');
  if (existsSync(done)) return withScript(checked(release, readFileSync(done, 'utf8').trim(), dir, url));
  mkdirSync(root, { recursive: true });
  return withFileLock(join(tools.cacheDir, 'locks', `cpython-${release.version}.lock`), async () => {
    if (existsSync(done)) return withScript(checked(release, readFileSync(done, 'utf8').trim(), dir, url));
    log(`downloading CPython ${release.version} source from ${url}`);
    let body: Buffer;
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(10 * 60_000) });
      if (!response.ok) throw new Error(`HTTP ${response.status} ${(await response.text()).slice(0, 200).trim()}`);
      body = Buffer.from(await response.arrayBuffer());
    } catch (err) {
      throw new ClassifiedError(
        'infra',
        'capability_missing',
        `CPython ${release.version} source: ${url} could not be fetched (${err instanceof Error ? err.message : String(err)}). Fix: make the Go module proxy reachable, or set ROLLOUT_GO_PROXY to a mirror of it`,
      );
    }
    const sha256 = createHash('sha256').update(body).digest('hex');
    checked(release, sha256, dir, url);
    const zip = join(root, `${release.version}.zip`);
    const staging = `${dir}.partial`;
    writeFileSync(zip, body);
    rmSync(staging, { recursive: true, force: true });
    const extract = `import sys, zipfile, os, shutil
prefix = 'github.com/python/cpython@v' + sys.argv[3] + '+incompatible/'
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefix) or info.is_dir(): continue
        out = os.path.join(sys.argv[2], info.filename[len(prefix):])
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(info) as src, open(out, 'wb') as dst: shutil.copyfileobj(src, dst)`;
    await runToolOk(tools, await pipPython(tools), ['-c', extract, zip, staging, release.version]);
    rmSync(zip, { force: true });
    if (!existsSync(join(staging, 'configure'))) throw new ClassifiedError('infra', 'provision_failed', `CPython ${release.version} source from ${url} has no configure script at its top`);
    writeFileSync(join(staging, '.sha256'), `${sha256}\n`);
    rmSync(dir, { recursive: true, force: true });
    renameSync(staging, dir);
    return withScript({ release: { ...release, sha256 }, dir, url });
  });
}

/** The build script beside configure, as this version of the builder writes it (its hash is in every key that uses it). */
function withScript(source: CpythonSource): CpythonSource {
  const file = join(source.dir, 'build-cpython.sh');
  const script = cpythonBuildScript();
  if (!existsSync(file) || readFileSync(file, 'utf8') !== script) writeFileSync(file, script, { mode: 0o755 });
  return source;
}

function checked(release: CpythonRelease, sha256: string, dir: string, url: string): CpythonSource {
  if (release.sha256 && release.sha256 !== sha256) {
    throw new ClassifiedError(
      'infra',
      'provision_failed',
      `CPython ${release.version} source from ${url} has sha256 ${sha256}, not the pinned ${release.sha256}: refused. Fix: check ROLLOUT_GO_PROXY serves the real module (remove ${dir} to fetch it again)`,
    );
  }
  return { release: { ...release, sha256 }, dir, url };
}

/**
 * The source and its build script as a FROM-scratch image a task's Dockerfile can `COPY --from`
 * (for a Python the tests ask uv for): tagged by version and the script's hash, made once.
 */
export async function ensureCpythonSourceImage(
  tools: ImageTools,
  release: CpythonRelease,
  env: NodeJS.ProcessEnv = process.env,
  log: (line: string) => void = () => undefined,
): Promise<CpythonSource & { tag: string }> {
  const source = await ensureCpythonSource(tools, release, env, log);
  const tag = `localhost/rollout-source/cpython:${release.version}-${createHash('sha256').update(cpythonBuildScript()).digest('hex').slice(0, 12)}`;
  if (await imageExists(tools, tag)) return { ...source, tag };
  return withFileLock(join(tools.cacheDir, 'locks', `cpython-image-${release.version}.lock`), async () => {
    if (await imageExists(tools, tag)) return { ...source, tag };
    log(`making ${tag} (CPython ${release.version} source and its build script)`);
    const containerfile = join(tools.cacheDir, 'cpython', `${release.version}.Containerfile`);
    writeFileSync(containerfile, 'FROM scratch\nCOPY . /\n');
    await withBuildStorage(
      tools,
      (file, args) => runTool(tools, file, args),
      async () => {
        await runToolOk(tools, 'podman', ['build', '--pull=never', '--network', 'none', '-f', containerfile, '-t', tag, source.dir], {
          timeoutMs: 10 * 60_000,
        });
      },
    );
    return { ...source, tag };
  });
}
