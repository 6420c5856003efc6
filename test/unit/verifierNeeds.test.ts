/**
 * What a task's tests/test.sh installs at verify time, read as the shell would run it, whoever runs
 * the tool (images/verifierNeeds.ts): `sudo`, `env`, an assignment before it, a full path; quoted
 * pins; requirements files under tests/; uv's --with/--from in either spelling.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { readVerifierNeeds } from '../../images/verifierNeeds.js';

const scratch = mkdtempSync(join(tmpdir(), 'verifier-needs-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

test('apt packages and pinned wheels, however the script spells the command', () => {
  const tests = join(scratch, 'tests');
  mkdirSync(tests, { recursive: true });
  writeFileSync(join(tests, 'requirements.txt'), '# pins\npytest==8.4.1\nnumpy==2.1.3  # inline comment\nrequests\n--index-url https://example.org/simple\n');
  writeFileSync(join(tests, 'extra.txt'), 'psutil==7.0.0\n');
  writeFileSync(
    join(tests, 'test.sh'),
    [
      '#!/bin/bash',
      'DEBIAN_FRONTEND=noninteractive apt-get install -y curl jq',
      'sudo -E apt install -y tmux',
      'pip3.11 install "pytest-json-ctrf==0.3.5" requests',
      'python3 -m pip install -r /tests/requirements.txt',
      '/root/.local/bin/uvx --with=pyyaml==6.0.2,toml==0.10.2 --from ruff==0.6.9 ruff check',
      'env UV_NO_CACHE=1 uv run --with-requirements extra.txt pytest',
    ].join('\n'),
  );
  const needs = readVerifierNeeds(join(tests, 'test.sh'));
  assert.deepEqual(needs.aptPackages, ['curl', 'jq', 'tmux']);
  assert.deepEqual(needs.requirements, ['numpy==2.1.3', 'psutil==7.0.0', 'pytest-json-ctrf==0.3.5', 'pytest==8.4.1', 'pyyaml==6.0.2', 'ruff==0.6.9', 'toml==0.10.2']);
  assert.equal(needs.usesUv, true);
});
