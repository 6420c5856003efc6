/**
 * A loopback OCI registry for tests: Debian's docker-registry (distribution
 * 2.8) bound to 127.0.0.1 on a free port, its storage in a scratch directory,
 * and pushing an image from the image builder's podman storage into it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { imageTools } from '../../images/imageTools.js';
import { freePort } from '../../servers/temporalDevServer.js';

export interface OciRegistry {
  /** host:port, for image references (`${address}/repo:tag`). */
  address: string;
  stop(): Promise<void>;
}

export async function startOciRegistry(): Promise<OciRegistry> {
  const dir = mkdtempSync(join(tmpdir(), 'oci-registry-'));
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  writeFileSync(
    join(dir, 'config.yml'),
    `version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: ${join(dir, 'data')}\n  delete:\n    enabled: true\nhttp:\n  addr: ${address}\n`,
  );
  const log = createWriteStream(join(dir, 'registry.log'));
  const child: ChildProcess = spawn('docker-registry', ['serve', join(dir, 'config.yml')], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
  for (const deadline = Date.now() + 15_000; ; ) {
    const failed = await Promise.race([spawnError, new Promise<undefined>((r) => setTimeout(r, 100, undefined))]);
    if (failed) throw new Error(`cannot start docker-registry (apt-get install docker-registry, or run scripts/ensure-kube-node.sh): ${failed.message}`);
    if (child.exitCode !== null) throw new Error(`docker-registry exited ${child.exitCode}: ${readFileSync(join(dir, 'registry.log'), 'utf8')}`);
    if (await fetch(`http://${address}/v2/`).then((r) => r.ok, () => false)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`docker-registry did not answer on ${address} within 15 s`);
    }
  }
  return { address, stop };
}

/**
 * Pushes a local image (podman storage of the image builder) to `ref` on a
 * plain-HTTP loopback registry; returns the manifest digest the registry holds
 * (sha256:...), which a node that pulls `ref` reports as the pod's imageID.
 */
export function pushImage(localImage: string, ref: string): string {
  const tools = imageTools();
  const dir = mkdtempSync(join(tmpdir(), 'push-'));
  try {
    const digestFile = join(dir, 'digest');
    const r = spawnSync('podman', ['push', '--quiet', '--tls-verify=false', '--format', 'oci', '--digestfile', digestFile, localImage, ref], { env: tools.env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`podman push ${localImage} ${ref} failed (exit ${r.status}): ${r.stderr}`);
    return readFileSync(digestFile, 'utf8').trim();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Builds (or finds in podman's cache) a one-file image FROM scratch: the pod sandbox's pause holder. */
export function buildPauseImage(pauseBinary: string, tag: string): void {
  const tools = imageTools();
  const dir = mkdtempSync(join(tmpdir(), 'pause-image-'));
  try {
    writeFileSync(join(dir, 'Containerfile'), 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n');
    writeFileSync(join(dir, 'pause'), readFileSync(pauseBinary), { mode: 0o755 });
    const r = spawnSync('podman', ['build', '--quiet', '--network', 'host', '-t', tag, dir], { env: tools.env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`podman build of the pause image failed (exit ${r.status}): ${r.stderr}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
