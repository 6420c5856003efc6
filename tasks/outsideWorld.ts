/**
 * Whether a task failed here because it reaches for the internet beyond the package registries
 * this machine serves (a model from a hub, a Python build from GitHub, an installer script from a
 * vendor's site): that is neither the task's fault nor the pipeline's, and `rollout task check`
 * says so instead of calling the task broken. Read from what the tools print when a name does not
 * resolve or a connection is refused (curl, wget, uv, pip/requests, git, apt).
 */

/** Hosts of the registries the build and the sandboxes reach here; failing to reach one of them is another problem. Debian's archive snapshots are not among them. */
const REGISTRY_HOSTS = [
  /^(?!snapshot\.)(.+\.)?debian\.org$/,
  /^pypi\.org$/,
  /^files\.pythonhosted\.org$/,
  /^registry\.npmjs\.org$/,
  /^proxy\.golang\.org$/,
  /^sum\.golang\.org$/,
  /^repo\d?\.maven\.apache\.org$/,
  /^repo\.maven\.apache\.org$/,
];

/** What tools print, with the host in group 1. */
const UNREACHABLE = [
  /Could not resolve host:? '?([A-Za-z0-9.-]+\.[A-Za-z]{2,})/g, // curl, git
  /Could not resolve '([A-Za-z0-9.-]+)'/g, // apt
  /unable to resolve host address [‘'"]([A-Za-z0-9.-]+)/g, // wget
  /Failed to download https?:\/\/([A-Za-z0-9.-]+)/g, // uv
  /error sending request for url \(https?:\/\/([A-Za-z0-9.-]+)/g, // uv, reqwest
  /HTTPS?ConnectionPool\(host='([A-Za-z0-9.-]+)'[^)]*\): Max retries exceeded/g, // requests, urllib3, huggingface_hub
  /Failed to connect to ([A-Za-z0-9.-]+\.[A-Za-z]{2,}) port \d+/g, // curl
  /getaddrinfo (?:ENOTFOUND|EAI_AGAIN) ([A-Za-z0-9.-]+)/g, // node
  /: ([A-Za-z0-9.-]+) is beyond the package registries this machine reaches/g, // ours (beyondRegistries)
];

/** How the pipeline itself says that something comes only from `host`, which is not a registry reached here. */
export function beyondRegistries(host: string, why: string): string {
  return `${why}: ${host} is beyond the package registries this machine reaches`;
}

/** Needs that tools state without naming a host: [what they print, the host it means]. */
const IMPLIED: [RegExp, string][] = [
  // uv with downloads off (as offline verification runs it) where the image lacks the Python asked for:
  // its managed Pythons are python-build-standalone releases on GitHub.
  [/A managed Python download is available for Python/, 'github.com'],
];

export interface OutsideWorldNeed {
  /** The hosts it could not reach, beyond the registries. */
  hosts: string[];
  /** Where: the image build, the reference solution, or the verifier. */
  stage: 'build' | 'oracle' | 'verifier';
}

/**
 * The non-registry hosts `text` says could not be reached (none: the failure is something else), but
 * `provided`: hosts whose content the image builder put in the image (astral.sh's uv installer, which
 * TB2's test.sh curls: uv comes from PyPI instead, so that curl failing changes nothing).
 */
export function unreachableHosts(text: string, provided: readonly string[] = []): string[] {
  const hosts = new Set<string>();
  for (const pattern of UNREACHABLE) {
    for (const m of text.matchAll(pattern)) {
      const host = (m[1] ?? '').toLowerCase().replace(/\.$/, '');
      if (host && !REGISTRY_HOSTS.some((r) => r.test(host)) && !provided.includes(host)) hosts.add(host);
    }
  }
  for (const [pattern, host] of IMPLIED) if (pattern.test(text) && !provided.includes(host)) hosts.add(host);
  return [...hosts].sort();
}

/** The verdict's words, for the report and the table. */
export function describeOutsideWorldNeed(need: OutsideWorldNeed): string {
  const where = need.stage === 'build' ? 'its image build' : need.stage === 'oracle' ? 'its reference solution' : 'its verifier';
  return `needs the internet beyond the package registries: ${where} could not reach ${need.hosts.join(', ')} (not a failure of the task or of the pipeline; it cannot be checked on this machine)`;
}
