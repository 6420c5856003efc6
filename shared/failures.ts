/**
 * The failure taxonomy: every error that ends an attempt has a class and a type.
 *
 * - `model`: the policy's own doing; recorded as data, scored, never retried.
 * - `infra`: the environment broke (sandbox, transport, inference endpoint,
 *   storage, verifier crash, lost worker); retried on a fresh sandbox.
 * - `task`: the task itself is invalid; fails fast, never retried.
 *
 * Every other module imports these names; no string literal for a failure type
 * appears anywhere else. No dependencies: workflow code imports this module.
 */
export const FAILURE_TYPES = {
  // generation_too_long: one policy call outlasted its time while the server stayed healthy.
  model: ['max_turns', 'agent_timeout', 'malformed_tool_call', 'context_overflow', 'generation_too_long'],
  infra: [
    'provision_failed',
    'provision_timeout',
    'capability_missing',
    'sandbox_lost',
    'exec_transport',
    'policy_unavailable',
    'storage_error',
    'verifier_crashed',
    'verifier_timeout',
    'worker_lost',
  ],
  task: ['invalid_spec', 'verifier_self_check_failed'],
} as const;

export type FailureClass = keyof typeof FAILURE_TYPES;
export type FailureType<C extends FailureClass = FailureClass> = (typeof FAILURE_TYPES)[C][number];

export const FAILURE_CLASSES = ['model', 'infra', 'task'] as const;

export interface Failure<C extends FailureClass = FailureClass> {
  failureClass: C;
  type: FailureType<C>;
  message: string;
}

/**
 * The name Temporal sees for a classified error (ApplicationFailure.type), e.g.
 * `infra/sandbox_lost`. Retry policies list the non-retryable ones by this name.
 */
export function failureName(f: Pick<Failure, 'failureClass' | 'type'>): string {
  return `${f.failureClass}/${f.type}`;
}

/** Parses `infra/sandbox_lost` back into its class and type; undefined if it is not ours. */
export function parseFailureName(name: string): Pick<Failure, 'failureClass' | 'type'> | undefined {
  const slash = name.indexOf('/');
  if (slash < 0) return undefined;
  const cls = name.slice(0, slash);
  if (!(FAILURE_CLASSES as readonly string[]).includes(cls)) return undefined;
  const failureClass = cls as FailureClass;
  const type = name.slice(slash + 1);
  if (!(FAILURE_TYPES[failureClass] as readonly string[]).includes(type)) return undefined;
  return { failureClass, type: type as FailureType };
}

/**
 * An error that carries its class and type. Activities throw it; the workflow
 * reads the class back from the ApplicationFailure type name.
 */
export class ClassifiedError<C extends FailureClass = FailureClass> extends Error {
  readonly failureClass: C;
  readonly type: FailureType<C>;

  constructor(failureClass: C, type: FailureType<C>, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = failureName({ failureClass, type });
    this.failureClass = failureClass;
    this.type = type;
  }

  toFailure(): Failure<C> {
    return { failureClass: this.failureClass, type: this.type, message: this.message };
  }
}
