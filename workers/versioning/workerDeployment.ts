/**
 * Worker Versioning (Temporal Worker Deployments) for the pipeline's workers.
 *
 * With a build id, the main queue's worker (workflows and provisioning) is a versioned worker of the
 * deployment, and its workflows are PINNED: a rollout (and its group) runs to completion on the build
 * it started on, and new rollouts start on the deployment's current version, which an operator moves
 * with `temporal worker deployment set-current-version` once the new build's workers poll (docs/cluster.md).
 *
 * The host and policy queues stay unversioned (they report their build, but take any task): a host's
 * queue is bound to the machine that holds the sandboxes, not to a build, so whichever worker runs on
 * that machine now must serve the tool calls of every rollout whose sandbox lives there, old build or
 * new. Their activities' inputs are plain JSON checked at the boundary, so the builds share them.
 */
import type { WorkerDeploymentOptions } from '@temporalio/worker';
import type { WorkerBuild } from '../../shared/pipeline.js';

export type { WorkerBuild };

export const DEFAULT_DEPLOYMENT_NAME = 'rollout-pipeline';

const NAME = /^[A-Za-z0-9._-]{1,255}$/;

/** Checks a deployment name or build id; returns the problem in words, or undefined. */
export function badBuildPart(what: '--build-id' | '--deployment-name', value: string): string | undefined {
  return NAME.test(value) ? undefined : `${what} ${JSON.stringify(value)}: use 1-255 letters, digits, '.', '_' and '-'`;
}

/** The main queue's worker: versioned, its workflows pinned to the build they started on. */
export function pinnedDeployment(build: WorkerBuild): WorkerDeploymentOptions {
  return { version: { deploymentName: build.deploymentName, buildId: build.buildId }, useWorkerVersioning: true, defaultVersioningBehavior: 'PINNED' };
}

/** The host and policy queues' workers: they report the build but take tasks of every build. */
export function unversionedDeployment(build: WorkerBuild): WorkerDeploymentOptions {
  return { version: { deploymentName: build.deploymentName, buildId: build.buildId }, useWorkerVersioning: false };
}
