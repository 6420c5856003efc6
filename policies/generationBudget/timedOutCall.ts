/**
 * What a policy call that ran past its time means (issue 19): if the server
 * answers a health probe, it was working and the model kept generating, so
 * the failure is the model's (model/generation_too_long: scored, not retried,
 * the server is not asked to regenerate the same turn again and again); if the
 * server does not answer, it is infra/policy_unavailable, waited out by the
 * policy activity's retries and never shown to the model.
 */
import { ApplicationFailure } from '@temporalio/common';
import { failureName } from '../../shared/failures.js';
import { probeEndpoint } from './endpointProbe.js';
import type { TurnBudget } from './turnBudget.js';

export const GENERATION_TOO_LONG = failureName({ failureClass: 'model', type: 'generation_too_long' });
const UNAVAILABLE = failureName({ failureClass: 'infra', type: 'policy_unavailable' });

export async function timedOutCall(url: string, baseUrl: string, budget: TurnBudget, headers: Record<string, string>): Promise<ApplicationFailure> {
  const probe = await probeEndpoint(baseUrl, headers);
  const limit = `${Math.round(budget.timeoutMs / 1000)} s (${budget.timeoutSource}; max_tokens ${budget.maxTokens})`;
  if (probe.healthy) {
    return ApplicationFailure.create({
      type: GENERATION_TOO_LONG,
      message: `the policy call to ${url} was still generating after ${limit} while the server was healthy (${probe.evidence}): the model's generation ran too long. Lower sampling.max_tokens or raise requestTimeoutMs; give the server a slot per concurrent rollout so no call waits for one.`,
      nonRetryable: true,
    });
  }
  return ApplicationFailure.create({
    type: UNAVAILABLE,
    message: `policy endpoint ${url} did not answer within ${limit} and failed its health probe (${probe.evidence})`,
    nonRetryable: false,
  });
}
