/** The admission of one call of an openai policy: its server's gate, with a wait that fits the policy call's time limit. */
import type { z } from 'zod';
import type { OpenAIPolicySchema } from '../../shared/pipeline.js';
import { turnBudget } from '../generationBudget/turnBudget.js';
import { serverKind } from '../sampling/serverKind.js';
import { serverRoot } from '../tokens/serverEndpoints.js';
import { admissionGate, type Admission } from './admissionGate.js';

type OpenAIPolicyConfig = z.output<typeof OpenAIPolicySchema>;

/** The start-to-close timeout of a policy call (workflows/rollout.ts): the wait and the request share it. */
const POLICY_CALL_LIMIT_MS = 300_000;

export interface AdmittedCall {
  admission: Admission;
  /** Returns the calls of this worker still in flight to the server. */
  release(): number;
}

export async function admitCall(config: OpenAIPolicyConfig, signal?: AbortSignal): Promise<AdmittedCall> {
  const budget = turnBudget(config);
  const root = serverRoot(config.baseUrl, config.tokens.serverUrl);
  const kind = await serverKind(config.server, root, budget.timeoutMs);
  const gate = admissionGate(root, kind);
  const maxWaitMs = Math.max(0, Math.min(config.admission.maxWaitSec * 1000, POLICY_CALL_LIMIT_MS - budget.timeoutMs - 10_000));
  const admission = await gate.admit({ mode: config.admission.mode, kvHigh: config.admission.kvHigh, kvLow: config.admission.kvLow, maxWaitMs }, signal);
  let released = false;
  return {
    admission,
    release: () => {
      if (!released) {
        released = true;
        return gate.release();
      }
      return gate.inFlight;
    },
  };
}
