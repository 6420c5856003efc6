/**
 * Activities throw ClassifiedError (`infra/sandbox_lost`, ...). Temporal
 * names a plain Error's failure after its class, so at the activity boundary
 * each classified error becomes an ApplicationFailure whose type is the
 * taxonomy name the workflow classifies and the retry policies list. Its
 * evidence (what failure attribution found) travels as the failure's details.
 */
import { ApplicationFailure } from '@temporalio/common';
import { ClassifiedError } from '../shared/failures.js';

export function classifiedToApplicationFailure(err: unknown): unknown {
  if (err instanceof ClassifiedError) {
    return ApplicationFailure.create({
      type: err.name,
      message: err.message,
      nonRetryable: err.failureClass !== 'infra',
      cause: err,
      ...(err.evidence.length > 0 ? { details: [{ evidence: err.evidence }] } : {}),
    });
  }
  return err;
}

/** The same activities, each rethrowing classified errors as typed ApplicationFailures. */
export function withClassifiedFailures<T extends Record<string, (...args: never[]) => Promise<unknown>>>(activities: T): T {
  const wrapped: Record<string, (...args: never[]) => Promise<unknown>> = {};
  for (const [name, fn] of Object.entries(activities)) {
    wrapped[name] = async (...args: never[]) => {
      try {
        return await fn(...args);
      } catch (err) {
        throw classifiedToApplicationFailure(err);
      }
    };
  }
  return wrapped as T;
}
