/** Every workflow the pipeline's workers run (workflowsPath points here). */
export { rollout } from './rollout.js';
export { rolloutGroup } from './rolloutGroup.js';
export { janitor } from './janitor.js';
