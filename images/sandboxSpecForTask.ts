/** The sandbox a task asks for: its starting files, workdir, limits and network. */
import { ClassifiedError } from '../shared/failures.js';
import type { SandboxOwner, SandboxSpec } from '../shared/sandbox.js';
import type { LoadedTask } from '../shared/task.js';
import type { TaskImage } from './taskImage.js';
import { VERIFIER_TOOLS_PATH } from './verifierAdditions.js';

/** Harbor's default when a task declares no memory ([environment] memory_mb). */
export const DEFAULT_TASK_MEMORY_MB = 2048;
/**
 * Most processes and threads alive at once in one sandbox. The task format has
 * no field for it; without a cap a fork bomb in any rollout takes the host's
 * whole pid space.
 */
export const SANDBOX_PIDS_LIMIT = 1024;

/**
 * `runsContainers`: the provider starts the task's image (Kubernetes), so an
 * image is required and the environment/ files are expected in it; otherwise
 * (local) the environment/ files are the starting files and a Dockerfile
 * cannot be built.
 */
export function sandboxSpecForTask(task: LoadedTask, owner: SandboxOwner, labels: Record<string, string> = {}, runsContainers = false, image?: TaskImage): SandboxSpec {
  if (runsContainers && !task.dockerImage) {
    throw new ClassifiedError(
      'task',
      'invalid_spec',
      `${task.dir}/task.toml: the Kubernetes sandbox provider runs the task's image: set [environment].docker_image (an image holding the starting files at ${task.workdir})`,
    );
  }
  if (!runsContainers && task.needsContainer && !image) {
    throw new ClassifiedError(
      'task',
      'invalid_spec',
      `${task.dir}/environment/Dockerfile: the local sandbox provider runs a Dockerfile task only on an image built here. ` +
        'Fix: build it with `rollout env build` (after scripts/ensure-image-tools.sh), run the task with the kubernetes provider and [environment].docker_image, or replace the Dockerfile with the starting files under environment/.',
    );
  }
  // Every sandbox has a memory and a pids ceiling, whatever the task declares: a memory hog or a fork bomb stops there.
  const limits: SandboxSpec['limits'] = { memoryMb: task.limits.memoryMb ?? DEFAULT_TASK_MEMORY_MB, pids: SANDBOX_PIDS_LIMIT };
  if (task.limits.cpus !== undefined) limits.cpus = task.limits.cpus;
  if (task.limits.diskMb !== undefined) limits.diskMb = task.limits.diskMb;
  if (image && !runsContainers) {
    return {
      environmentDir: task.environmentDir,
      rootfs: image.rootfs,
      env: image.env,
      // Root in a Docker container may change any file of its image (a COPY'd 0444 file, say); these act only inside the sandbox's own root.
      // setuid/setgid as Docker's root has them: apt-get drops to _apt to download (an oracle that apt-installs needs it).
      // sys_chroot, kill and net_bind_service as Docker's root has them too: services an oracle starts (sshd chroots).
      fileCapabilities: ['chown', 'dac_override', 'fowner', 'fsetid', 'setuid', 'setgid', 'sys_chroot', 'kill', 'net_bind_service'],
      // The verifier's offline tools (uv, wheels), read-only: the agent can read them but not change them.
      readOnlyMounts: [
        ...(image.verifier.uvDir ? [{ source: image.verifier.uvDir, target: `${VERIFIER_TOOLS_PATH}/bin` }] : []),
        { source: image.verifier.wheelDir, target: `${VERIFIER_TOOLS_PATH}/wheels` },
        // The image as built, for the verifier's reset to put /root and /tmp back as they were.
        { source: image.rootfs, target: `${VERIFIER_TOOLS_PATH}/image` },
      ],
      workdir: task.declaredWorkdir ?? image.workdir,
      limits,
      network: task.network.mode,
      owner,
      labels: { task: task.id, ...labels },
    };
  }
  return {
    ...(task.dockerImage ? { image: task.dockerImage } : {}),
    environmentDir: task.environmentDir,
    workdir: task.workdir,
    limits,
    network: task.network.mode,
    owner,
    labels: { task: task.id, ...labels },
  };
}
