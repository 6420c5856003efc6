import { NEVER_RETRIED } from '../../shared/failures.js';

/** Failures that retrying the same activity cannot fix: every model and task type, and these infra ones. */
export const NON_RETRYABLE = [
  ...NEVER_RETRIED,
  'infra/sandbox_lost',
  'infra/capability_missing',
  'infra/provision_failed',
  'infra/provision_timeout',
  'infra/verifier_crashed',
  'infra/verifier_timeout',
];

/** An unavailable policy endpoint (5xx, 429, refused, timeout) is waited out with this, never shown to the model. */
export const POLICY_RETRY = { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '15 seconds', maximumAttempts: 20, nonRetryableErrorTypes: NON_RETRYABLE };
