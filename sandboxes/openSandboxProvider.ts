/**
 * The sandbox provider a worker uses, from its environment:
 *   ROLLOUT_SANDBOX_PROVIDER=local (default)   namespaces + overlayfs on this machine
 *   ROLLOUT_SANDBOX_PROVIDER=kubernetes        Pods, through the API server of the
 *     in-cluster service account or $KUBECONFIG, in ROLLOUT_SANDBOX_NAMESPACE
 *     (default rollout-sandboxes); optional ROLLOUT_SANDBOX_RUNTIME_CLASS,
 *     ROLLOUT_SANDBOX_NODE_SELECTOR (k=v,k=v), ROLLOUT_POD_CREATES_PER_SECOND.
 * With Kubernetes every worker reaches every sandbox, so the "host" whose
 * queue carries tool calls is the namespace, shared by all workers.
 */
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import type { SandboxProvider } from '../shared/sandbox.js';
import { KubernetesSandboxProvider } from './kubernetes/kubernetesSandboxProvider.js';
import { LocalSandboxProvider } from './local/localSandboxProvider.js';

export class ProviderSettingError extends Error {
  override readonly name = 'ProviderSettingError';
}

export function openSandboxProvider(env: NodeJS.ProcessEnv = process.env): { provider: SandboxProvider; host: string } {
  const kind = env.ROLLOUT_SANDBOX_PROVIDER ?? 'local';
  if (kind === 'local') return { provider: new LocalSandboxProvider(), host: hostname() };
  if (kind !== 'kubernetes') throw new ProviderSettingError(`ROLLOUT_SANDBOX_PROVIDER=${kind}: use local (the default) or kubernetes`);
  const namespace = env.ROLLOUT_SANDBOX_NAMESPACE ?? 'rollout-sandboxes';
  const nodeSelector = env.ROLLOUT_SANDBOX_NODE_SELECTOR
    ? Object.fromEntries(
        env.ROLLOUT_SANDBOX_NODE_SELECTOR.split(',').map((pair) => {
          const [k, v] = pair.split('=');
          if (!k || v === undefined) throw new ProviderSettingError(`ROLLOUT_SANDBOX_NODE_SELECTOR=${env.ROLLOUT_SANDBOX_NODE_SELECTOR}: write key=value pairs separated by commas`);
          return [k, v];
        }),
      )
    : undefined;
  const rate = env.ROLLOUT_POD_CREATES_PER_SECOND === undefined ? undefined : Number(env.ROLLOUT_POD_CREATES_PER_SECOND);
  if (rate !== undefined && !(rate > 0)) throw new ProviderSettingError(`ROLLOUT_POD_CREATES_PER_SECOND=${env.ROLLOUT_POD_CREATES_PER_SECOND}: give a positive number`);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  const provider = new KubernetesSandboxProvider({
    kubeConfig,
    namespace,
    ...(env.ROLLOUT_SANDBOX_RUNTIME_CLASS ? { runtimeClassName: env.ROLLOUT_SANDBOX_RUNTIME_CLASS } : {}),
    ...(nodeSelector ? { nodeSelector } : {}),
    ...(rate ? { createsPerSecond: rate } : {}),
  });
  return { provider, host: `k8s-${namespace}` };
}
