import type { ResolvedPolicyConfig } from './pipeline.js';

/** The name a policy goes by in logs and summaries: the script, the model, or the harness and its model. */
export function policyLabel(policy: ResolvedPolicyConfig): string {
  if (policy.kind === 'scripted') return `scripted:${policy.script}`;
  if (policy.kind === 'harness') return `${policy.harness}:${policy.inference.model}`;
  return policy.model;
}
