/**
 * A base's apt sources are where and how the official images keep them, so the usual Dockerfile edit
 * that enables source packages works (apt-get source, as the original image allows).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { aptSources } from '../../images/aptSources.js';

function runHook(hook: string): { dir: string; files: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'apt-sources-'));
  mkdirSync(join(dir, 'etc/apt/sources.list.d'), { recursive: true });
  execFileSync('sh', ['-c', `echo 'deb http://old bookworm main' > "$1/etc/apt/sources.list" && ${hook}`, 'sh', dir]);
  return { dir, files: readdirSync(join(dir, 'etc/apt/sources.list.d')) };
}

test('debian.sources in deb822 with the release, -updates and -security; no sources.list left', () => {
  const sources = aptSources({ suite: 'bookworm' }, 'http://deb.debian.org/debian');
  assert.deepEqual(sources.mirrors, ['deb http://deb.debian.org/debian bookworm main', 'deb http://deb.debian.org/debian bookworm-updates main', 'deb http://deb.debian.org/debian-security bookworm-security main']);
  const { dir, files } = runHook(sources.hook);
  try {
    assert.deepEqual(files, ['debian.sources']);
    assert.deepEqual(readdirSync(join(dir, 'etc/apt')).includes('sources.list'), false);
    const text = readFileSync(join(dir, 'etc/apt/sources.list.d/debian.sources'), 'utf8');
    assert.match(text, /^Types: deb\nURIs: http:\/\/deb\.debian\.org\/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: \/usr\/share\/keyrings\/debian-archive-keyring\.gpg\n\nTypes: deb\nURIs: http:\/\/deb\.debian\.org\/debian-security\nSuites: bookworm-security\n/);
    // The edit Dockerfiles make to get source packages.
    execFileSync('sed', ['-i', 's/^Types: deb$/Types: deb deb-src/', join(dir, 'etc/apt/sources.list.d/debian.sources')]);
    assert.equal(readFileSync(join(dir, 'etc/apt/sources.list.d/debian.sources'), 'utf8').match(/^Types: deb deb-src$/gm)?.length, 2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an Ubuntu stand-in keeps them in ubuntu.sources; a mirror without a -security beside it gets none', () => {
  const { dir, files } = runHook(aptSources({ suite: 'trixie', aptSourcesFile: 'ubuntu.sources' }, 'http://mirror.example/debian').hook);
  rmSync(dir, { recursive: true, force: true });
  assert.deepEqual(files, ['ubuntu.sources']);
  assert.deepEqual(aptSources({ suite: 'trixie' }, 'http://apt.internal/proxy').mirrors, ['deb http://apt.internal/proxy trixie main', 'deb http://apt.internal/proxy trixie-updates main']);
});
