/**
 * provisionSandbox: a fresh sandbox for one attempt (the task's image built on first use), the
 * attempt's start recorded in the trajectory, and the experiment record that says exactly what ran.
 */
import { createHash } from 'node:crypto';
import { ClassifiedError } from '../../shared/failures.js';
import { hostTaskQueue } from '../../shared/names.js';
import { TOOL_SCHEMAS } from '../../shared/tools.js';
import { metaName, SYSTEM_PROMPT, type AttemptMeta } from '../../agent/conversation.js';
import { activityLog } from '../activityLog.js';
import type { ProvisionInput, ProvisionOutput } from '../contract.js';
import { taskEnvironment } from '../../images/taskEnvironment.js';
import { withHeartbeats } from '../heartbeats.js';
import { pipelineVersion } from '../pipelineVersion.js';
import { sandboxSpecForTask } from '../../images/sandboxSpecForTask.js';
import { taskOfGroup, type ActivityContext } from './activityContext.js';

export const TOOL_INTERFACE_HASH = createHash('sha256').update(JSON.stringify(TOOL_SCHEMAS)).digest('hex');
export const RESET_RULES = 'fresh sandbox per attempt: new namespaces, overlay upper layer discarded, task files read-only lower layer';

export async function provisionSandbox(ctx: ActivityContext, input: ProvisionInput): Promise<ProvisionOutput> {
  const { deps, countSandboxes } = ctx;
  const task = taskOfGroup(ctx.tasks, input.group);
  const started = performance.now();
  let identity = '';
  const { handle, enforcedLimits, image, abandoned } = await withHeartbeats(async (signal) => {
    // A Dockerfile task on the local provider: its image, built on first use (one build per host, shared).
    const environment = await taskEnvironment(task, deps.provider.name, (line) => activityLog(deps.logger, input).info(line));
    identity = environment.identity;
    const spec = sandboxSpecForTask(
      task,
      { workflowId: input.workflowId, runId: input.runId, attempt: input.attempt },
      { batch: input.group.batchId, rollout: String(input.index) },
      deps.provider.name === 'kubernetes',
      environment.image,
    );
    const made = await deps.provider.provision(spec);
    // The workflow gave up on this call (timed out or cancelled) while we provisioned: nobody will
    // use or tear down this sandbox, so remove it now instead of leaving it to the reaper.
    if (signal?.aborted) {
      await deps.provider.teardown(made.handle);
      return { ...made, abandoned: true };
    }
    return { ...made, abandoned: false };
  });
  if (abandoned) throw new ClassifiedError('infra', 'provision_timeout', `sandbox ${handle.id} was ready after the workflow stopped waiting for it; torn down`);
  const provisionMs = performance.now() - started;
  const meta: AttemptMeta = { system: SYSTEM_PROMPT, instruction: task.instruction, tools: TOOL_SCHEMAS, startedAt: new Date().toISOString() };
  try {
    await deps.store.put(input.trajectoryRef, metaName(input.attempt), meta);
  } catch (err) {
    await deps.provider.teardown(handle);
    throw err;
  }
  const agentTimeoutSec = input.group.limits.agentTimeoutSec ?? task.agentTimeoutSec;
  activityLog(deps.logger, input).info({ sandbox: handle.id, provisionMs: Math.round(provisionMs) }, 'sandbox provisioned');
  await countSandboxes();
  return {
    handle,
    hostQueue: hostTaskQueue(deps.host),
    enforcedLimits,
    provisionMs,
    agentTimeoutSec,
    verifierTimeoutSec: task.verifierTimeoutSec,
    workdir: handle.workdir,
    experiment: {
      taskId: task.id,
      taskVersion: task.version,
      taskDir: task.dir,
      // A provider that runs the task's image says which one, by digest: [environment].docker_image and what it resolved to.
      environmentIdentity: image ? `${identity}; image ${image.reference} = ${image.digest}` : identity,
      toolInterfaceHash: TOOL_INTERFACE_HASH,
      resetRules: RESET_RULES,
      verifierHash: task.verifierHash,
      verifyMode: input.group.verifyMode,
      limits: { ...input.group.limits, agentTimeoutSec },
      policy: input.group.policy,
      pipelineVersion: pipelineVersion(),
      workerIdentity: deps.workerIdentity,
      sandboxProvider: deps.provider.name,
      network: task.network,
      resume: input.group.failurePolicy.resume ?? 'restart',
    },
  };
}
