/**
 * What tools print when a host is out of reach, read into the hosts a task needs beyond the
 * package registries (real lines from this machine's TB2 runs and the tools' own messages).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { missingAptVersions, pinnedBeyondMirror } from '../../images/aptPins.js';
import { beyondRegistries, describeOutsideWorldNeed, unreachableHosts } from '../../tasks/outsideWorld.js';

test('hosts out of reach are read from curl, uv, requests, wget, apt and git; registries and what the image provides are not counted', () => {
  const log = [
    'curl: (6) Could not resolve host: astral.sh',
    'error: Failed to download https://github.com/astral-sh/python-build-standalone/releases/download/20250828/cpython-3.13.7.tar.gz',
    "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded with url: /api/models",
    'wget: unable to resolve host address ‘example.com’',
    "Err:1 http://archive.ubuntu.com/ubuntu noble InRelease\n  Could not resolve 'archive.ubuntu.com'",
    "fatal: unable to access 'https://gitlab.com/x/y.git/': Could not resolve host: gitlab.com",
    "Could not resolve 'deb.debian.org'",
    "HTTPSConnectionPool(host='files.pythonhosted.org', port=443): Max retries exceeded",
  ].join('\n');
  assert.deepEqual(unreachableHosts(log, ['astral.sh']), ['archive.ubuntu.com', 'example.com', 'github.com', 'gitlab.com', 'huggingface.co']);
  assert.deepEqual(unreachableHosts('E: Unable to locate package foo\nModuleNotFoundError: No module named x'), [], 'other failures name no host');
  // multi-source-data-merger (TB2): `uvx -p 3.13` on a python:3.11 image; uv would fetch that Python from GitHub.
  const uv = "error: No interpreter found for Python 3.13 in managed installations or search path\nhint: A managed Python download is available for Python 3.13, but Python downloads are set to 'never'";
  assert.deepEqual(unreachableHosts(uv), ['github.com']);
});

test('the verdict says where, which hosts, and that it is not a failure of the task or the pipeline', () => {
  assert.equal(
    describeOutsideWorldNeed({ hosts: ['github.com'], stage: 'build' }),
    'needs the internet beyond the package registries: its image build could not reach github.com (not a failure of the task or of the pipeline; it cannot be checked on this machine)',
  );
});

test("a Dockerfile pinning versions of Ubuntu's archive: the pins are read from apt's words, and the builder's sentence names the archive as out of reach", () => {
  // overfull-hbox's build log (TB2), FROM ubuntu:24.04 made from Debian trixie.
  const log = "Reading state information...\nE: Version '2023.20240207-1' for 'texlive-latex-base' was not found\nError: building at STEP \"RUN apt-get update\"";
  assert.deepEqual(missingAptVersions(log), ['texlive-latex-base=2023.20240207-1']);
  const said = beyondRegistries('archive.ubuntu.com', 'the Dockerfile pins texlive-latex-base=2023.20240207-1, versions of the original image\'s archive that the Debian stand-in does not have');
  assert.deepEqual(unreachableHosts(`build failed\n${said}\n`), ['archive.ubuntu.com']);
});

test("a Dockerfile pinning Debian versions its mirror no longer serves: the need is an archive snapshot, named with the fixes; deb.debian.org stays a registry", () => {
  const log = "E: Version '1.22.21' for 'dpkg-dev' was not found\n";
  const said = pinnedBeyondMirror(missingAptVersions(log), [{ suite: 'bookworm' }]);
  assert.match(said, /apt pins dpkg-dev=1\.22\.21, versions Debian bookworm's mirror no longer serves/);
  assert.match(said, /Fix: point ROLLOUT_DEBIAN_MIRROR at an archive snapshot .*snapshot\.debian\.org\/archive\/debian\/.* or map this FROM with a ROLLOUT_BASE_MAP rule/);
  assert.deepEqual(unreachableHosts(`build failed\n${said}\n`), ['snapshot.debian.org']);
  assert.deepEqual(unreachableHosts("Could not resolve 'deb.debian.org'\nCould not resolve 'security.debian.org'"), [], "Debian's mirrors are registries here");
  // Ubuntu's archive stays the need of an Ubuntu stand-in.
  assert.match(pinnedBeyondMirror(['texlive-latex-base=2023.20240207-1'], [{ suite: 'trixie', originalArchive: 'archive.ubuntu.com' }]), /archive\.ubuntu\.com is beyond the package registries/);
});
