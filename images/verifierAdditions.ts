/**
 * What the image builder adds so a task's tests/test.sh runs offline and unmodified: where the
 * verifier's tools appear in the sandbox, the step that installs what test.sh would install at
 * verify time (apt packages, a Python uv would download, built from source), and the environment
 * the verifier's commands run with.
 */

/** Where the verifier's uv and wheels appear inside the sandbox (read-only). */
export const VERIFIER_TOOLS_PATH = '/opt/rollout-verifier';
/** The verifier's default package index: a path with no project under it (pip and uv then use the wheels only). */
const VERIFIER_NO_INDEX = `file://${VERIFIER_TOOLS_PATH}/wheels/no-index`;

/** A Python built into the image for the verifier, where uv finds it as a managed installation. */
export interface VerifierPython {
  minor: string;
  version: string;
  sourceImage: string;
  prefix: string;
}

/** Where the Pythons built for the verifier live: uv's managed-installation directory for the verifier (UV_PYTHON_INSTALL_DIR). */
export const VERIFIER_PYTHONS_DIR = '/opt/rollout-python';

/** uv's name for this machine in a managed installation's directory (x86_64, aarch64). */
function uvArch(): string {
  return process.arch === 'arm64' ? 'aarch64' : process.arch === 'x64' ? 'x86_64' : process.arch;
}

/**
 * Where a Python the tests ask uv for, and the image lacks, is built: a directory named as uv names a
 * managed installation (cpython-3.12.14-linux-x86_64-gnu), so every uv command finds it as one
 * (`uv python install 3.12` says it is installed; `uv venv`, `uv run`, `-p`, `.python-version`,
 * `requires-python` take it) as well as on the verifier's PATH.
 */
export function verifierPythonPrefix(version: string): string {
  return `${VERIFIER_PYTHONS_DIR}/cpython-${version}-linux-${uvArch()}-gnu`;
}

/**
 * As test.sh would run it: apt-get install with Debian's defaults (Recommends too: gcc then brings
 * libc6-dev); and each Python uv would download (a managed CPython from github.com), built from source.
 */
export function verifierStep(aptPackages: string[], needPython: string | undefined, pythons: VerifierPython[], user: string | undefined): string {
  if (aptPackages.length === 0 && !needPython && pythons.length === 0) return '';
  const lines = ['', '# Added by rollout-pipeline: what tests/test.sh installs at verify time, so it runs offline.', 'USER root'];
  if (aptPackages.length > 0 || needPython) {
    const checks = aptPackages.map((p) => `dpkg-query -W -f='\${Status}' ${p} 2>/dev/null | grep -q 'ok installed' || missing="$missing ${p}"`);
    if (needPython) checks.push(`command -v python${needPython} >/dev/null || missing="$missing python3"`);
    const script = [
      'set -e; missing=""',
      ...checks,
      'if [ -n "$missing" ]; then had_lists=$(find /var/lib/apt/lists -maxdepth 1 -type f ! -name lock | wc -l); apt-get update; DEBIAN_FRONTEND=noninteractive apt-get install -y $missing; if [ "$had_lists" = 0 ]; then rm -rf /var/lib/apt/lists/*; fi; fi',
    ].join('; ');
    lines.push(`RUN ${script}`);
  }
  for (const python of pythons) {
    lines.push(`# Python ${python.minor} for uv: CPython ${python.version} from source (${python.sourceImage}), as uv would have downloaded it`);
    lines.push(`COPY --from=${python.sourceImage} / /usr/src/python`, `RUN sh /usr/src/python/build-cpython.sh ${python.prefix}`);
  }
  return [...lines, ...(user ? [`USER ${user}`] : []), ''].join('\n');
}

/** What the verifier's commands get: its tools first on the PATH, the pinned wheels and no other index. */
export function verifierEnvironment(imageEnv: Record<string, string>, pythons: VerifierPython[]): Record<string, string> {
  return {
    PATH: `${[`${VERIFIER_TOOLS_PATH}/bin`, ...pythons.map((p) => `${p.prefix}/bin`)].join(':')}:${imageEnv.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'}`,
    // The pinned wheels, and as the default index one that has no project: nothing else from PyPI, yet
    // an index the tests name themselves (a service's, `--index-url http://localhost:8080/simple`) is
    // asked, as it would be under Harbor (PIP_NO_INDEX and UV_OFFLINE refused every index).
    PIP_FIND_LINKS: `${VERIFIER_TOOLS_PATH}/wheels`,
    PIP_INDEX_URL: VERIFIER_NO_INDEX,
    PIP_DISABLE_PIP_VERSION_CHECK: '1',
    UV_FIND_LINKS: `${VERIFIER_TOOLS_PATH}/wheels`,
    // UV_INDEX_URL, not UV_DEFAULT_INDEX: uv 0.9 lets that one beat a command line's --index-url.
    UV_INDEX_URL: VERIFIER_NO_INDEX,
    UV_PYTHON_DOWNLOADS: 'never',
    ...(pythons.length > 0 ? { UV_PYTHON_INSTALL_DIR: VERIFIER_PYTHONS_DIR } : {}),
  };
}
