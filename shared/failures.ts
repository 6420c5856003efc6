/**
 * The failure taxonomy: every error that ends an attempt has a class and a type.
 *
 * - `model`: the policy's own doing; recorded as data, scored, never retried.
 *   Besides the agent loop's own ends (max turns, time budget, malformed calls,
 *   context overflow), these are the attributed ones (ATTRIBUTED_MODEL_TYPES):
 *   an end that looks like infrastructure but whose evidence shows the agent
 *   caused it (docs/failure-attribution.md). They get the reward of a failed
 *   attempt instead of being masked.
 * - `infra`: the environment broke (sandbox, transport, inference endpoint,
 *   storage, verifier crash, lost worker); retried on a fresh sandbox.
 * - `task`: the task itself is invalid; fails fast, never retried.
 *
 * Every other module imports these names; no string literal for a failure type
 * appears anywhere else. No dependencies: workflow code imports this module.
 */
export const FAILURE_TYPES = {
  model: [
    'max_turns',
    'agent_timeout',
    'malformed_tool_call',
    'context_overflow',
    // The verifier ran past its timeout on the state the agent left; on the untouched start it completes.
    'verifier_blocked',
    // The verifier crashed or wrote no reward on the state the agent left; on the untouched start it completes.
    'verifier_broken',
    // The agent replaced, removed or planted programs, libraries or startup hooks the in-place verifier loads.
    'verifier_tampered',
    // The sandbox died while the agent's own command ran, with no host-side cause.
    'sandbox_killed',
    // The sandbox's own memory limit was hit (its cgroup's OOM killer) while the agent's command ran.
    'memory_exhausted',
    // One policy call outlasted its time while the server stayed healthy (it answered a probe).
    'generation_too_long',
    // A harness (policy kind harness) that exited on its own with an error after calling the model: its stderr tail is the evidence.
    'harness_crashed',
  ],
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
    // The harness (policy kind harness) is not installed on the worker's host (scripts/ensure-harnesses.sh).
    'harness_not_installed',
    // The harness ended without calling the model once: its settings or its install are broken, not the model.
    'harness_never_called_model',
  ],
  task: ['invalid_spec', 'verifier_self_check_failed'],
} as const;

export type FailureClass = keyof typeof FAILURE_TYPES;
export type FailureType<C extends FailureClass = FailureClass> = (typeof FAILURE_TYPES)[C][number];

export const FAILURE_CLASSES = ['model', 'infra', 'task'] as const;

/** Model types given only after evidence showed the agent, not the infrastructure, caused the end. */
export const ATTRIBUTED_MODEL_TYPES = ['verifier_blocked', 'verifier_broken', 'verifier_tampered', 'sandbox_killed', 'memory_exhausted'] as const satisfies readonly FailureType<'model'>[];

/** Every `<class>/<type>` name that retrying the same activity cannot fix (model and task failures). */
export const NEVER_RETRIED: readonly string[] = [...FAILURE_TYPES.model.map((t) => `model/${t}`), ...FAILURE_TYPES.task.map((t) => `task/${t}`)];

/**
 * Retry scope of the infra types: these are retried as a whole attempt on a fresh sandbox, never by
 * running the same activity again (its sandbox is gone, the host lacks the capability, the verifier
 * failed on that sandbox's state). Every other infra type is retried in place first.
 */
export const RETRIED_AS_NEW_ATTEMPT = [
  'sandbox_lost',
  'capability_missing',
  'provision_failed',
  'provision_timeout',
  'verifier_crashed',
  'verifier_timeout',
] as const satisfies readonly FailureType<'infra'>[];

/** The `<class>/<type>` names a retry of the same activity must not run for: NEVER_RETRIED and RETRIED_AS_NEW_ATTEMPT. */
export const NOT_RETRIED_IN_PLACE: readonly string[] = [...NEVER_RETRIED, ...RETRIED_AS_NEW_ATTEMPT.map((type) => failureName({ failureClass: 'infra', type }))];

export interface Failure<C extends FailureClass = FailureClass> {
  failureClass: C;
  type: FailureType<C>;
  message: string;
  /** What the attribution found (the control run, how the sandbox died, the host's health); shown with the failure. */
  evidence?: string[];
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
  readonly evidence: string[];

  constructor(failureClass: C, type: FailureType<C>, message: string, options?: { cause?: unknown; evidence?: string[] }) {
    super(message, options);
    this.name = failureName({ failureClass, type });
    this.failureClass = failureClass;
    this.type = type;
    this.evidence = options?.evidence ?? [];
  }

  toFailure(): Failure<C> {
    return { failureClass: this.failureClass, type: this.type, message: this.message, ...(this.evidence.length > 0 ? { evidence: this.evidence } : {}) };
  }
}
