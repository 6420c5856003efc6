/** resolveTask: pins a task named by its directory to its id and current version (content hash). */
import { ClassifiedError } from '../../shared/failures.js';
import type { TaskRef, TaskRequest } from '../../shared/task.js';
import type { ActivityContext } from './activityContext.js';

export function resolveTask({ tasks }: ActivityContext, request: TaskRequest): TaskRef {
  const task = tasks.load(request.dir);
  if (request.id !== undefined && request.id !== task.id) {
    throw new ClassifiedError('task', 'invalid_spec', `${request.dir}: the task id is the directory name ${task.id}, not ${request.id}. Fix: drop task.id or rename the directory`);
  }
  if (request.version !== undefined && request.version !== task.version) {
    throw new ClassifiedError(
      'task',
      'invalid_spec',
      `${request.dir}: version ${request.version.slice(0, 12)} was requested, the files are ${task.version.slice(0, 12)}. Fix: request the current version or restore the files`,
    );
  }
  return { id: task.id, dir: task.dir, version: task.version };
}
