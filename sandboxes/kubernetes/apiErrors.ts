/**
 * How the Kubernetes provider reads the API server's refusals: the HTTP status
 * of a client error, a used-up ResourceQuota (capacity) told apart from a
 * missing permission, and the infra failures it ends an attempt with.
 */
import { ApiException } from '@kubernetes/client-node';
import { ClassifiedError } from '../../shared/failures.js';

/** The API server's "exceeded quota: ..." (or "status unknown for quota: ...") of a 403; undefined when the 403 is about something else (RBAC). */
export function quotaExceeded(err: unknown): string | undefined {
  const body = err instanceof ApiException ? (typeof err.body === 'string' ? err.body : JSON.stringify(err.body ?? '')) : '';
  const text = `${err instanceof Error ? err.message : String(err)} ${body}`;
  return /(?:exceeded quota|status unknown for quota): [^"\\]{1,300}/.exec(text)?.[0];
}

export function infra(type: 'provision_failed' | 'provision_timeout' | 'sandbox_lost' | 'exec_transport' | 'capability_missing', message: string, cause?: unknown): ClassifiedError<'infra'> {
  return new ClassifiedError('infra', type, message, cause === undefined ? undefined : { cause });
}

export function statusCode(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}
