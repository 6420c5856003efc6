/**
 * Where libraries load from, read the way glibc reads it (shared/loaderConfig.ts), checked against
 * glibc's own tools on this machine: this host's loader cache parsed here lists what `ldconfig -p`
 * lists, and caches written by ldconfig in each of its formats parse to the same entries. And the
 * sandbox's root as the agent left it (sandboxes/local/agentRoot/mergedRoot.ts): links resolved inside it,
 * never against the host's root, whiteouts hiding the image's files.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { MergedRoot } from '../../sandboxes/local/agentRoot/mergedRoot.js';
import { OpenDir } from '../../sandboxes/local/agentRoot/rootedTree.js';
import { isLoaderDefaultDir, nssServices, parseLoaderCache, parseLoaderConf, relativeDir, searchDirOf } from '../../shared/loaderConfig.js';

const scratch = mkdtempSync(join(tmpdir(), 'loader-config-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** `ldconfig -p`'s listing ("\tname (flags) => path") as name => path lines. */
function ldconfigListing(cache?: string): string[] {
  const out = execFileSync('ldconfig', ['-p', ...(cache ? ['-C', cache] : [])], { encoding: 'utf8' });
  return out.split('\n').flatMap((l) => {
    const m = /^\s+(\S+) \([^)]*\)(?: OS ABI: [^=]*)? => (\S+)$/.exec(l);
    return m ? [`${m[1]} => ${m[2]}`] : [];
  });
}

test("this host's loader cache parses to what ldconfig -p lists, in its order", () => {
  const entries = parseLoaderCache(readFileSync('/etc/ld.so.cache'));
  assert.ok(entries && entries.length > 10, 'a real cache has entries');
  assert.deepEqual(entries.map((e) => `${e.name} => ${e.path}`), ldconfigListing());
  assert.ok(entries.some((e) => e.name === 'libc.so.6' && e.flags === 0x0303), 'x86-64 libc6 entries carry flags 0x0303');
});

test('caches ldconfig writes in its new, compat and old formats parse to the same entries; bytes the loader rejects parse to none', () => {
  const libs = join(scratch, 'libs');
  mkdirSync(libs, { recursive: true });
  copyFileSync('/usr/lib/x86_64-linux-gnu/libpcre2-8.so.0', join(libs, 'libpcre2-8.so.0'));
  writeFileSync(join(scratch, 'ld.so.conf'), `# a comment\n${libs}\n`);
  const listings = new Map<string, string[]>();
  for (const format of ['new', 'compat', 'old']) {
    const cache = join(scratch, `cache-${format}`);
    execFileSync('ldconfig', ['-c', format, '-C', cache, '-f', join(scratch, 'ld.so.conf')]);
    const entries = parseLoaderCache(readFileSync(cache));
    assert.ok(entries, format);
    assert.ok(entries.some((e) => e.path === join(libs, 'libpcre2-8.so.0')), `${format}: the configured directory's library is in it`);
    listings.set(format, entries.map((e) => `${e.name} => ${e.path}`));
  }
  assert.deepEqual(listings.get('compat'), listings.get('new'));
  assert.deepEqual(listings.get('old'), listings.get('new'));
  assert.deepEqual(listings.get('new'), ldconfigListing(join(scratch, 'cache-new')));
  assert.equal(parseLoaderCache(Buffer.from('not a cache')), undefined);
  assert.equal(parseLoaderCache(readFileSync(join(scratch, 'cache-new')).subarray(0, 60)), undefined, 'a truncated cache');
});

test("ldconfig's configuration, the name service switch, and the directories the loader searches", () => {
  assert.deepEqual(parseLoaderConf('include /etc/ld.so.conf.d/*.conf\n# x\n/usr/local/lib\n/opt/a:/opt/b, /opt/c=libc6\nhwcap 1 x\n'), { dirs: ['/usr/local/lib', '/opt/a', '/opt/b', '/opt/c'], includes: ['/etc/ld.so.conf.d/*.conf'] });
  assert.deepEqual(nssServices('passwd:  files systemd\ngroup: files [NOTFOUND=return] db\n# hosts: evil\nhosts: files dns\n'), ['files', 'systemd', 'db', 'dns']);
  for (const d of ['lib', 'usr/lib', 'lib64', 'usr/lib64', 'usr/lib/x86_64-linux-gnu', 'lib/aarch64-linux-gnu', 'usr/lib32']) assert.ok(isLoaderDefaultDir(d), d);
  for (const d of ['usr/local/lib', 'usr/lib/x86_64-linux-gnu/perl/5.40.1/auto/Cwd', 'opt/conda/lib', 'usr/lib/jvm/java-17/lib']) assert.ok(!isLoaderDefaultDir(d), d);
  assert.equal(searchDirOf('usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3'), 'usr/lib/x86_64-linux-gnu');
  assert.equal(searchDirOf('lib/x86_64-linux-gnu/tls/haswell'), 'lib/x86_64-linux-gnu');
  assert.equal(searchDirOf('usr/local/lib'), 'usr/local/lib');
  assert.equal(relativeDir('/usr//lib/./x/../y/'), 'usr/lib/y');
  assert.equal(relativeDir('usr/lib'), undefined);
});

test("the agent's root read from the host: the upper layer over the image, whiteouts hide, links resolve inside the root", async () => {
  const image = join(scratch, 'image');
  const upper = join(scratch, 'upper');
  mkdirSync(join(image, 'usr/lib'), { recursive: true });
  mkdirSync(join(image, 'etc'), { recursive: true });
  symlinkSync('usr/lib', join(image, 'lib'));
  writeFileSync(join(image, 'usr/lib/libx.so.1'), 'image');
  writeFileSync(join(image, 'usr/lib/gone.so'), 'image');
  writeFileSync(join(image, 'etc/conf'), 'image conf');
  mkdirSync(join(upper, 'usr/lib'), { recursive: true });
  mkdirSync(join(upper, 'etc'), { recursive: true });
  writeFileSync(join(upper, 'usr/lib/liby.so.1'), 'agent');
  execFileSync('mknod', [join(upper, 'usr/lib/gone.so'), 'c', '0', '0']);
  // An absolute link resolves against the sandbox's root: /etc/passwd here is the image's (absent), never the host's.
  symlinkSync('/etc/passwd', join(upper, 'etc/conf'));
  symlinkSync('/usr/lib/libx.so.1', join(upper, 'usr/lib/alias.so'));
  const open = await OpenDir.openTrusted(upper);
  try {
    const root = new MergedRoot(open, image);
    assert.deepEqual(await root.resolve('lib/libx.so.1'), { physical: 'usr/lib/libx.so.1', exists: true, agentWritten: false }, "an image file in a directory the agent wrote into is still the image's");
    assert.deepEqual(await root.resolve('lib/liby.so.1'), { physical: 'usr/lib/liby.so.1', exists: true, agentWritten: true });
    assert.deepEqual(await root.resolve('usr/lib/alias.so'), { physical: 'usr/lib/libx.so.1', exists: true, agentWritten: true }, 'a link the agent made is its own');
    assert.equal((await root.resolve('usr/lib/gone.so')).exists, false, 'a whiteout hides the image file');
    assert.deepEqual(await root.read('etc/conf', 1024), { from: 'absent' }, 'the link is followed inside the root, where /etc/passwd does not exist');
    const read = await root.read('lib/liby.so.1', 1024);
    assert.equal(read.from, 'agent');
    assert.equal('bytes' in read && read.bytes.toString(), 'agent');
    assert.deepEqual(await root.read('lib/liby.so.1', 2), { from: 'unreadable', why: 'larger than 2 bytes' });
    assert.deepEqual(await root.list('usr/lib'), ['alias.so', 'libx.so.1', 'liby.so.1']);
    const pristine = new MergedRoot(undefined, image);
    assert.equal((await pristine.read('etc/conf', 1024)).from, 'image');
  } finally {
    await open.close();
  }
});
