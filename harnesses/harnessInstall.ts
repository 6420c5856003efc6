/**
 * Where a harness's venv is on this worker's host, and how its adapter is started: each harness is
 * installed as published into its own venv by scripts/ensure-harnesses.sh (set-up purpose `harness`),
 * under $ROLLOUT_HARNESS_HOME (default: the pipeline's cache). The adapters are python/harness_bridge/.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ClassifiedError } from '../shared/failures.js';
import { HARNESS_VERSIONS, type HarnessName } from '../shared/pipeline.js';

/** The python module of each harness's adapter (python/harness_bridge/harness_bridge/). */
const ADAPTER_MODULES: Record<HarnessName, string> = { 'mini-swe-agent': 'harness_bridge.mini_swe_agent', 'terminus-2': 'harness_bridge.terminus_2' };

export const HARNESS_BRIDGE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'python', 'harness_bridge');

export interface InstalledHarness {
  name: HarnessName;
  version: string;
  python: string;
  module: string;
}

export function harnessHome(env: NodeJS.ProcessEnv = process.env): string {
  const cache = env.ROLLOUT_CACHE_DIR ?? join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'rollout-pipeline');
  return env.ROLLOUT_HARNESS_HOME ?? join(cache, 'harnesses');
}

/** The installed harness, or an error that names it, the host and the fix. */
export function installedHarness(name: string, host: string, env: NodeJS.ProcessEnv = process.env): InstalledHarness {
  if (!(name in HARNESS_VERSIONS))
    throw new ClassifiedError(
      'infra',
      'harness_not_installed',
      `unknown harness ${JSON.stringify(name)}; the harnesses are ${Object.keys(HARNESS_VERSIONS).join(', ')}`,
    );
  const harness = name as HarnessName;
  const venv = join(harnessHome(env), harness);
  const python = join(venv, 'bin', 'python');
  if (!existsSync(python) || !existsSync(join(venv, '.requirements-key'))) {
    throw new ClassifiedError(
      'infra',
      'harness_not_installed',
      `harness ${harness} ${HARNESS_VERSIONS[harness]} is not installed on host ${host} (no venv at ${venv}). Fix: run \`bash scripts/ensure-harnesses.sh\` (or \`bash scripts/setup.sh harness\`) on that host, or point ROLLOUT_HARNESS_HOME at where it is installed`,
    );
  }
  return { name: harness, version: HARNESS_VERSIONS[harness], python, module: ADAPTER_MODULES[harness] };
}
