/**
 * What a task runs on with a given provider: for the local provider, a
 * Dockerfile task's image built here (or found in the cache); otherwise
 * nothing extra. Used by provisioning, verification and `rollout task check`,
 * so each sees the same image, the same verifier toolchain and the same
 * environment identity.
 */
import type { LoadedTask } from '../shared/task.js';
import type { VerifyOptions } from '../verifier/runVerifier.js';
import { ensureTaskImage, imageIdentity, type TaskImage } from './taskImage.js';
import { VERIFIER_TOOLS_PATH } from './verifierAdditions.js';

export interface TaskEnvironment {
  image: TaskImage | undefined;
  /** The experiment record's environmentIdentity. */
  identity: string;
  /** What the verifier gets: the offline toolchain's environment, the image root to reset /root and /tmp from. */
  verify: VerifyOptions;
  /** The image's build (a Dockerfile task on the local provider): how long it took, and whether it was cached now. */
  build?: { builtMs: number; cacheHit: boolean };
}

export async function taskEnvironment(task: LoadedTask, providerName: string, log?: (line: string) => void): Promise<TaskEnvironment> {
  if (providerName !== 'local' || !task.needsContainer) return { image: undefined, identity: `${providerName}:${task.environmentHash}`, verify: {} };
  const { image, cacheHit } = await ensureTaskImage(task, log ? { log } : {});
  return { image, identity: `${providerName}:${imageIdentity(image)}`, verify: { env: image.verifier.env, imageRoot: `${VERIFIER_TOOLS_PATH}/image` }, build: { builtMs: image.buildMs, cacheHit } };
}
