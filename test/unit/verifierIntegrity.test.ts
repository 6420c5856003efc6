/**
 * The pieces of a reward the agent cannot write that need no sandbox: which image files the in-place
 * verifier trusts (integrityRules.ts), and the host-side read that never follows a link, never blocks
 * on a FIFO and never reads a device (rootedRead.ts, exercised on this process's own root).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { processStartTime } from '../../sandboxes/local/procfs.js';
import { readInSandboxRoot } from '../../sandboxes/local/agentRoot/rootedRead.js';
import { OpenDir, TreeTooLargeError, walkTree } from '../../sandboxes/local/agentRoot/rootedTree.js';
import { isConsoleScript, isProtectedImageFile, isStartupHook, pathDirOf } from '../../shared/integrityRules.js';

const scratch = mkdtempSync(join(tmpdir(), 'verifier-integrity-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

test('the image files a verifier trusts: programs, system libraries, the interpreter, startup hooks; not package directories', () => {
  for (const p of ['usr/bin/cat', 'bin/bash', 'usr/lib/x86_64-linux-gnu/libc.so.6', 'lib64/ld-linux-x86-64.so.2', 'usr/local/lib/python3.13/os.py', 'usr/local/bin/python3', 'etc/ld.so.preload', 'usr/lib/python3/dist-packages/sitecustomize.py']) {
    assert.ok(isProtectedImageFile(p), p);
  }
  for (const p of ['usr/local/lib/python3.13/site-packages/numpy/core/_multiarray_umath.so', 'usr/lib/node_modules/npm/bin/npm-cli.js', 'app/run.sh', 'etc/hosts', 'usr/share/doc/x']) {
    assert.ok(!isProtectedImageFile(p), p);
  }
  assert.ok(isStartupHook('usr/local/lib/python3.13/site-packages/usercustomize.py'));
  assert.ok(!isStartupHook('app/sitecustomize.py'), "the workspace is the agent's answer, judged by the tests");
  assert.deepEqual(pathDirOf('usr/local/bin/grep'), { dir: 'usr/local/bin', rank: 1, name: 'grep' });
  assert.equal(pathDirOf('usr/lib/grep'), undefined);
});

test("pip's console scripts are told from programs: replacing one is an upgrade, not a forgery", () => {
  const pip = "#!/usr/local/bin/python3.13\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom pip._internal.cli.main import main\nif __name__ == '__main__':\n    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n    sys.exit(main())\n";
  assert.ok(isConsoleScript(pip));
  assert.ok(!isConsoleScript('#!/bin/sh\nexit 0\n'));
  assert.ok(!isConsoleScript('\x7fELF\x02\x01\x01'));
  assert.ok(!isConsoleScript(`#!/usr/bin/python3\nimport os\nos.system('echo 1 > /logs/verifier/reward.txt')\nimport sys\nsys.exit(0)\n`));
});

test('a read from the host refuses a link anywhere on the path, a FIFO, a device and a file past its cap; it reads a regular file', async () => {
  const pid = process.pid;
  const start = processStartTime(pid);
  assert.ok(start);
  const dir = join(scratch, 'logs', 'verifier');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'reward.txt'), '1\n');
  writeFileSync(join(scratch, 'secret'), 'host secret\n');
  symlinkSync(join(scratch, 'secret'), join(dir, 'link.txt'));
  symlinkSync(dir, join(scratch, 'dirlink'));
  symlinkSync('/dev/zero', join(dir, 'zero'));
  execFileSync('mkfifo', [join(dir, 'pipe')]);
  assert.equal(Buffer.from(await readInSandboxRoot(pid, start, join(dir, 'reward.txt'), 64)).toString(), '1\n');
  await assert.rejects(readInSandboxRoot(pid, start, join(dir, 'link.txt'), 64), /link\.txt is a symbolic link/);
  await assert.rejects(readInSandboxRoot(pid, start, join(scratch, 'dirlink', 'reward.txt'), 64), /dirlink is not a directory|dirlink is a symbolic link/);
  await assert.rejects(readInSandboxRoot(pid, start, join(dir, 'zero'), 64), /symbolic link/);
  await assert.rejects(readInSandboxRoot(pid, start, '/dev/zero', 64), /not a regular file/);
  await assert.rejects(readInSandboxRoot(pid, start, join(dir, 'pipe'), 64), /not a regular file/);
  await assert.rejects(readInSandboxRoot(pid, start, join(dir, 'reward.txt'), 1), /more than the 1 allowed/);
  await assert.rejects(readInSandboxRoot(pid, start, join(dir, 'none'), 64), /No such file or directory/);
  await assert.rejects(readInSandboxRoot(pid, start, `${dir}/../verifier/reward.txt`, 64), /'\.\.' is not allowed/);
  await assert.rejects(readInSandboxRoot(pid, 'not-its-start-time', join(dir, 'reward.txt'), 64), /is gone/);
});

test('a walk of a tree the agent writes never leaves it and stops at its entry cap', async () => {
  const tree = join(scratch, 'upper');
  mkdirSync(join(tree, 'usr', 'bin'), { recursive: true });
  writeFileSync(join(tree, 'usr', 'bin', 'cat'), 'fake');
  symlinkSync('/etc', join(tree, 'etc'));
  const walked: string[] = [];
  const root = await OpenDir.openTrusted(tree);
  try {
    for await (const e of walkTree(root, 100)) walked.push(`${e.path}${e.stat.isSymbolicLink() ? '@' : e.stat.isDirectory() ? '/' : ''}`);
    assert.deepEqual(walked, ['etc@', 'usr/', 'usr/bin/', 'usr/bin/cat'], 'the link is listed, never entered');
    await assert.rejects(async () => {
      for await (const _ of walkTree(root, 2)) void _;
    }, TreeTooLargeError);
  } finally {
    await root.close();
  }
});
