/** Every workflow the pipeline's workers run (workflowsPath points here). */
export { rollout } from './rollout.js';
export { rolloutGroup } from './rolloutGroup.js';
export { rolloutAttempt } from './attempt/attemptOnHost.js';
export { janitor } from './janitor.js';
