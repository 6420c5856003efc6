/**
 * The Pythons a task's tests ask uv for, in every form uv takes a request (images/pythonRequests.ts),
 * and what each needs: nothing when the image's Python meets it, else the newest minor this builder
 * makes that does (uv picks the newest), else a note (none is made here).
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { parseDockerfile } from '../../images/dockerfile.js';
import { stagePython, stagePythonRequests } from '../../images/buildPythons.js';
import { commandLineRequests, minorSatisfies, parseVersionRequest, pythonRequestsOf, resolvePythonRequest } from '../../images/pythonRequests.js';

const scratch = mkdtempSync(join(tmpdir(), 'python-requests-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

test('uv and uvx command lines: -p, --python, --python=, -pX, uv python install|pin|find, UV_PYTHON', () => {
  const script = [
    'uvx -p 3.13 -w pytest==8.4.1 pytest',
    'uv venv --python 3.12 .tb && source .tb/bin/activate',
    'uv run --python=cpython@3.11 pytest',
    '/root/.local/bin/uv pip install -p3.10 requests==2.32.3',
    'uv python install 3.9 3.14.7',
    'export UV_PYTHON=python3.12',
    'uv pip install --python /tmp/venv pytest==8.4.1 # a path is not a request',
    '# uvx -p 3.8 commented out',
    'uv tool run \\\n  --python ">=3.11,<3.13" ruff',
  ].join('\n');
  assert.deepEqual(
    commandLineRequests(script, 'tests/test.sh').map((r) => r.request),
    ['3.13', '3.12', 'cpython@3.11', '3.10', '3.9', '3.14.7', 'python3.12', '>=3.11,<3.13'],
  );
});

test('files under tests/: .python-version, requires-python of a pyproject.toml and of inline script metadata', () => {
  const tests = join(scratch, 'tests');
  mkdirSync(join(tests, 'project'), { recursive: true });
  writeFileSync(join(tests, 'test.sh'), '#!/bin/bash\ncd /tests && uv run pytest\n');
  writeFileSync(join(tests, '.python-version'), '# pinned\n3.12\n');
  writeFileSync(join(tests, 'project', 'pyproject.toml'), '[project]\nname = "t"\nrequires-python = ">=3.13"\n');
  writeFileSync(join(tests, 'check.py'), '# /// script\n# requires-python = "==3.11.*"\n# dependencies = []\n# ///\nprint(1)\n');
  writeFileSync(join(tests, 'plain.py'), 'requires_python = ">=3.9"\n');
  assert.deepEqual(pythonRequestsOf(tests), [
    { request: '3.12', where: 'tests/.python-version' },
    { request: '==3.11.*', where: 'tests/check.py (inline requires-python)' },
    { request: '>=3.13', where: 'tests/project/pyproject.toml (requires-python)' },
  ]);
});

test('what a request needs: the image meets it, or the newest buildable minor that meets it, or none', () => {
  const buildable = ['3.9', '3.10', '3.11', '3.12', '3.13', '3.14'];
  assert.deepEqual(parseVersionRequest('cpython-3.12.4-linux-x86_64-gnu'), { minor: '3.12', patch: '3.12.4' });
  assert.equal(parseVersionRequest('pypy3.10'), undefined);
  assert.ok(minorSatisfies('3.12', '>=3.11,<3.13'));
  assert.ok(!minorSatisfies('3.13', '>=3.11,<3.13'));
  assert.ok(minorSatisfies('3.12', '>3.12'), '3.12.1 is above 3.12');
  assert.ok(minorSatisfies('3.11', '~=3.11.4') && !minorSatisfies('3.12', '~=3.11.4'));
  assert.ok(minorSatisfies('3.11', '<3.11.5'));
  assert.deepEqual(resolvePythonRequest('3.12', '3.11', buildable), { build: '3.12' });
  assert.deepEqual(resolvePythonRequest('3.12.4', '3.11', buildable), { build: '3.12', patch: '3.12.4' });
  assert.deepEqual(resolvePythonRequest('3.11', '3.11', buildable), { satisfiedByImage: true });
  assert.deepEqual(resolvePythonRequest('>=3.10', '3.11', buildable), { satisfiedByImage: true });
  assert.deepEqual(resolvePythonRequest('>=3.10,<3.11', '3.13', buildable), { build: '3.10' });
  assert.deepEqual(resolvePythonRequest('>=3.12', '3.11', buildable), { build: '3.14' }, 'uv takes the newest');
  assert.equal(resolvePythonRequest('3.7', '3.11', buildable), undefined);
  assert.equal(resolvePythonRequest('<3.8', '3.11', buildable), undefined);
});

test("a Dockerfile's uv steps: each stage's requests (a script's inline metadata, -p), and the Python it gets", () => {
  const context = join(scratch, 'context');
  mkdirSync(context, { recursive: true });
  writeFileSync(join(context, 'make.py'), '# /// script\n# requires-python = ">=3.13"\n# ///\nprint(1)\n');
  const parsed = parseDockerfile(
    ['FROM ubuntu:24.04 AS build', 'COPY make.py /root/', 'RUN uv run /root/make.py', 'FROM debian:bookworm-slim AS tools', 'RUN uv venv -p 3.12 /opt/v', 'FROM python:3.13-slim', 'RUN uv pip install --system six==1.17.0', 'FROM debian:bookworm-slim', 'RUN apt-get update'].join('\n'),
    'environment/Dockerfile',
  );
  const requests = stagePythonRequests(parsed, context);
  assert.deepEqual(requests.map((r) => (r === 'any' || r === undefined ? r : r.map((x) => x.request))), [['>=3.13'], ['3.12'], 'any', undefined]);
  const buildable = ['3.10', '3.11', '3.12', '3.13', '3.14'];
  assert.deepEqual(stagePython([{ request: '>=3.13', where: 'x' }], undefined, '3.13', buildable), { kind: 'debian', minor: '3.13' }, "trixie's python3 meets it");
  assert.deepEqual(stagePython([{ request: '3.12', where: 'x' }], undefined, '3.11', buildable), { kind: 'build', minor: '3.12' });
  assert.deepEqual(stagePython('any', '3.13', '3.11', buildable), { kind: 'base' });
  assert.deepEqual(stagePython('any', undefined, '3.11', buildable), { kind: 'debian', minor: '3.11' });
  assert.equal(stagePython([{ request: '3.7', where: 'x' }], undefined, '3.11', buildable).kind, 'none');
});
