/**
 * What the host trusts, given to every tool in a task's image whatever way it was installed. Where
 * egress passes through a TLS-inspecting proxy, a tool that brings its own roots fails with
 * "UnknownIssuer" or "self-signed certificate in chain": uv copied from its tool image (bundled
 * Mozilla roots), pip and requests (certifi), node (its compiled-in roots), cargo, go and curl built
 * elsewhere. Adding the host's CA files to the base's system store (baseImage.ts) reaches only the
 * tools that read that store.
 *
 * So each stage built on a base made here gets, right after its FROM line, the host's whole bundle
 * (its system store: the public roots and its own additions) at one fixed path, and the environment
 * variables by which each of those tools is told which bundle to trust, pointing at it. The bundle
 * comes from a `FROM scratch` image made here once per bundle content (like the tool images), so the
 * base images and their caches stay as they were, and the image's identity records the bundle's hash.
 * Build steps, the agent and the verifier all run with it (the image's ENV).
 *
 * Not covered: Java's keystore (a PKCS#12 or JKS file, not a PEM bundle an environment variable names).
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClassifiedError } from '../shared/failures.js';
import { withBuildStorage } from './buildStorage.js';
import { withFileLock } from './fileLock.js';
import { imageExists, runTool, runToolOk, type ImageTools } from './imageTools.js';

/** Where the host's bundle is in every stage built on a base made here. */
export const HOST_TRUST_BUNDLE_PATH = '/etc/ssl/rollout-host-ca-bundle.pem';

/** Each tool's own name for "the CA bundle to trust" (OpenSSL and what links it, uv, go and Ruby read SSL_CERT_FILE). */
export const HOST_TRUST_ENV_NAMES = [
  'SSL_CERT_FILE',
  'REQUESTS_CA_BUNDLE',
  'CURL_CA_BUNDLE',
  'PIP_CERT',
  'NODE_EXTRA_CA_CERTS',
  'CARGO_HTTP_CAINFO',
  'GIT_SSL_CAINFO',
  'AWS_CA_BUNDLE',
  'HTTPLIB2_CA_CERTS',
  'GRPC_DEFAULT_SSL_ROOTS_FILE_PATH',
  'DENO_CERT',
] as const;

export interface HostTrust {
  /** The host file the bundle was read from. */
  source: string;
  sha256: string;
  certificates: number;
  /** The local image holding it at /ca-bundle.pem. */
  tag: string;
}

/** The host's bundle: ROLLOUT_IMAGE_CA_BUNDLE, else the system store (Debian's, with /usr/local/share/ca-certificates in it). */
export function hostTrustBundle(env: NodeJS.ProcessEnv = process.env): { source: string; content: Buffer; sha256: string } | undefined {
  const source = env.ROLLOUT_IMAGE_CA_BUNDLE ?? '/etc/ssl/certs/ca-certificates.crt';
  if (!existsSync(source)) {
    if (env.ROLLOUT_IMAGE_CA_BUNDLE)
      throw new ClassifiedError(
        'infra',
        'capability_missing',
        `ROLLOUT_IMAGE_CA_BUNDLE=${source}: no such file. Fix: point it at a PEM bundle of the CAs the host trusts, or unset it to use /etc/ssl/certs/ca-certificates.crt`,
      );
    return undefined;
  }
  const content = readFileSync(source);
  if (!content.includes('-----BEGIN CERTIFICATE-----'))
    throw new ClassifiedError(
      'infra',
      'capability_missing',
      `${source}: holds no PEM certificate, so no tool in an image could trust the host's CAs with it. Fix: set ROLLOUT_IMAGE_CA_BUNDLE to a PEM bundle`,
    );
  return { source, content, sha256: createHash('sha256').update(content).digest('hex') };
}

/** The instructions that follow a FROM line on a base made here. */
export function hostTrustSteps(trust: Pick<HostTrust, 'tag'>): string[] {
  return [`COPY --from=${trust.tag} /ca-bundle.pem ${HOST_TRUST_BUNDLE_PATH}`, `ENV ${HOST_TRUST_ENV_NAMES.map((name) => `${name}=${HOST_TRUST_BUNDLE_PATH}`).join(' ')}`];
}

/** Makes (once per bundle content) the image that carries the host's bundle; undefined when the host has none. */
export async function ensureHostTrustImage(tools: ImageTools, env: NodeJS.ProcessEnv = process.env, log: (line: string) => void = () => undefined): Promise<HostTrust | undefined> {
  const bundle = hostTrustBundle(env);
  if (!bundle) return undefined;
  const tag = `localhost/rollout-trust:${bundle.sha256.slice(0, 20)}`;
  const trust = { source: bundle.source, sha256: bundle.sha256, certificates: bundle.content.toString('latin1').split('-----BEGIN CERTIFICATE-----').length - 1, tag };
  if (await imageExists(tools, tag)) return trust;
  return withFileLock(join(tools.cacheDir, 'locks', `trust-${bundle.sha256.slice(0, 20)}.lock`), async () => {
    if (await imageExists(tools, tag)) return trust;
    const work = mkdtempSync(join(tools.cacheDir, 'trust-'));
    try {
      log(`making ${tag}: the host's CA bundle (${bundle.source}, ${trust.certificates} certificates) for every image built here`);
      writeFileSync(join(work, 'ca-bundle.pem'), bundle.content, { mode: 0o644 });
      writeFileSync(join(work, 'Containerfile'), 'FROM scratch\nCOPY ca-bundle.pem /ca-bundle.pem\n');
      await withBuildStorage(tools, (file, args) => runTool(tools, file, args), async () => {
        await runToolOk(tools, 'podman', ['build', '--pull=never', '--network', 'none', '-f', join(work, 'Containerfile'), '-t', tag, work], { timeoutMs: 5 * 60_000 });
      });
      return trust;
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
}
