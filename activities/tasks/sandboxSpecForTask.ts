/** The sandbox a task asks for: its starting files, workdir, limits and network. */
import { ClassifiedError } from '../../shared/failures.js';
import type { SandboxOwner, SandboxSpec } from '../../shared/sandbox.js';
import type { LoadedTask } from '../../shared/task.js';

export function sandboxSpecForTask(task: LoadedTask, owner: SandboxOwner, labels: Record<string, string> = {}): SandboxSpec {
  if (task.needsContainer) {
    throw new ClassifiedError(
      'task',
      'invalid_spec',
      `${task.dir}/environment/Dockerfile: the local sandbox provider cannot build container images. ` +
        'Fix: run this task with a container provider (kubernetes, with [environment].docker_image), or replace the Dockerfile with the starting files under environment/.',
    );
  }
  const limits: SandboxSpec['limits'] = {};
  if (task.limits.memoryMb !== undefined) limits.memoryMb = task.limits.memoryMb;
  if (task.limits.cpus !== undefined) limits.cpus = task.limits.cpus;
  if (task.limits.diskMb !== undefined) limits.diskMb = task.limits.diskMb;
  return {
    environmentDir: task.environmentDir,
    workdir: task.workdir,
    limits,
    network: task.allowInternet ? 'host' : 'none',
    owner,
    labels: { task: task.id, ...labels },
  };
}
