/**
 * The pipeline's contract: what the trainer submits, what each rollout workflow returns, and the
 * experiment record that makes every reward reproducible. Workflows, activities, client and tests
 * import it from here; it is kept in three parts by lifecycle stage:
 *   policyConfig.ts   the policy a group samples from
 *   groupInput.ts     what a group is asked to do
 *   rolloutResult.ts  what a rollout and a group return
 */
export * from './policyConfig.js';
export * from './groupInput.js';
export * from './rolloutResult.js';
