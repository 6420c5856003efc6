/**
 * The general rule for a base that stands in for an older Debian release than
 * the FROM line names (python:3.13-slim-bookworm is made from trixie): the
 * packages a failed build could not find are looked for in the named release,
 * pinned below the image's own.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { baseForImage } from '../../activities/environment/baseMap.js';
import { aptFallbackStep, missingAptPackages } from '../../activities/environment/taskImage.js';

test('a python base made from another release than the FROM line names falls back to the named one; others do not', () => {
  assert.equal(baseForImage('python:3.13-slim-bookworm', 'Dockerfile:1').aptFallback, 'bookworm');
  assert.equal(baseForImage('python:3.11-slim-bookworm', 'Dockerfile:1').aptFallback, undefined, 'bookworm is what it names');
  assert.equal(baseForImage('python:3.13-slim', 'Dockerfile:1').aptFallback, undefined, 'no release named');
  assert.equal(baseForImage('debian:13.0-slim', 'Dockerfile:1').aptFallback, undefined);
});

test('the packages apt-get could not find are read from the build log', () => {
  const log = [
    'Reading package lists...',
    'Package libgl1-mesa-glx is not available, but is referred to by another package.',
    "E: Package 'libgl1-mesa-glx' has no installation candidate",
    'E: Unable to locate package python3-distutils',
    'E: Unable to locate package python3-distutils',
    'Error: building at STEP "RUN apt-get install": exit status 100',
  ].join('\n');
  assert.deepEqual(missingAptPackages(log), ['libgl1-mesa-glx', 'python3-distutils']);
  assert.deepEqual(missingAptPackages('E: Sub-process /usr/bin/dpkg returned an error code (1)\n'), []);
});

test('the fallback source is signed by the Debian keyring and pinned below the image’s own release', () => {
  const step = aptFallbackStep('bookworm', 'http://deb.debian.org/debian');
  assert.match(step, /^RUN echo 'deb \[signed-by=\/usr\/share\/keyrings\/debian-archive-keyring\.gpg\] http:\/\/deb\.debian\.org\/debian bookworm main'/m);
  assert.match(step, /Pin: release n=bookworm\\nPin-Priority: 100\\n/);
});
