import { NOT_RETRIED_IN_PLACE } from '../../shared/failures.js';

/** Failures that retrying the same activity cannot fix (shared/failures.ts declares the retry scope of each type). */
export const NON_RETRYABLE: string[] = [...NOT_RETRIED_IN_PLACE];

/** An unavailable policy endpoint (5xx, 429, refused, timeout) is waited out with this, never shown to the model. */
export const POLICY_RETRY = { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '15 seconds', maximumAttempts: 20, nonRetryableErrorTypes: NON_RETRYABLE };
