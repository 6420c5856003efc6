/**
 * What a task's sandbox may reach, by the rules of the task's own format, and what a batch may
 * set instead. Harbor's: `[environment] network_mode` (or the legacy `allow_internet`) is the
 * baseline, `[agent] network_mode` overrides it while the agent works, and a task.toml that says
 * nothing gets the internet (Harbor's `allow_internet` defaults to true). Here `public` means the
 * outside world through user-mode networking, with private ranges and the metadata address closed
 * (docs/sandbox.md); `none` means the sandbox's own loopback only.
 */
import type { LoadedTask, NetworkMode, TaskNetwork, TaskToml } from '../shared/task.js';

/** Harbor's spellings (and ours from before: "none") to the two modes sandboxes here give. */
function modeOf(value: 'public' | 'no-network' | 'none'): NetworkMode {
  return value === 'public' ? 'public' : 'none';
}

/** The network of the agent's sandbox (the verifier shares it) as task.toml gives it. */
export function resolveTaskNetwork(config: TaskToml): TaskNetwork {
  const agent = config.agent.network_mode;
  if (agent !== undefined && agent !== 'allowlist') return { mode: modeOf(agent), source: `task.toml [agent].network_mode = "${agent}"` };
  const env = config.environment;
  if (env.network_mode !== undefined && env.network_mode !== 'allowlist') return { mode: modeOf(env.network_mode), source: `task.toml [environment].network_mode = "${env.network_mode}"` };
  if (env.allow_internet !== undefined) return { mode: env.allow_internet ? 'public' : 'none', source: `task.toml [environment].allow_internet = ${env.allow_internet}` };
  return { mode: 'public', source: "Harbor's default (task.toml sets no network_mode or allow_internet)" };
}

/** The task with the network a batch or a command line asked for instead of its own. */
export function withNetwork(task: LoadedTask, mode: NetworkMode | undefined, source: string): LoadedTask {
  if (mode === undefined) return task;
  return { ...task, network: { mode, source, ...(mode !== task.network.mode ? { task: task.network } : {}) } };
}

/** One line for people: `public (Harbor's default ...)`, with what the task itself said when overridden. */
export function describeNetwork(network: TaskNetwork): string {
  const overridden = network.task ? `; the task's own: ${network.task.mode}, from ${network.task.source}` : '';
  return `${network.mode} (${network.source}${overridden})`;
}

/** Parses a --network value (CLI) or says what to write instead. */
export function parseNetworkMode(value: string, where: string): NetworkMode {
  if (value === 'none' || value === 'no-network') return 'none';
  if (value === 'public') return 'public';
  throw new Error(`${where} ${JSON.stringify(value)}: use none (the sandbox's own loopback only) or public (the internet through user-mode networking, private ranges closed)`);
}
