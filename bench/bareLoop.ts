/**
 * The baseline of section 2: the same work per rollout as the pipeline, in
 * this process, without Temporal. Provision a local sandbox; per turn the same
 * OpenAIPolicy call to the same HTTP server and the same executeToolCall;
 * the same verifier function (verifyInPlace); teardown. Rollouts of a batch
 * run concurrently, like the pipeline runs them.
 *
 * `store: true` also does what the activities do around that work besides
 * Temporal: load (and hash) the task in every step, keep the conversation in
 * the filesystem trajectory store and rebuild it before each policy call
 * (claim check), record every policy answer, tool result and verify outcome.
 * The difference between the two baselines is the store's share; what is left
 * between that and the pipeline is Temporal's.
 */
import { OpenAIPolicy } from '../policies/openaiPolicy.js';
import { executeToolCall } from '../agent/executeTool.js';
import { loadConversation, metaName, policyName, SYSTEM_PROMPT, toolName, type AttemptMeta, type PolicyTurnRecord, type ToolTurnRecord } from '../agent/conversation.js';
import type { LocalSandboxProvider } from '../sandboxes/local/localSandboxProvider.js';
import type { FsTrajectoryStore } from '../stores/fsTrajectoryStore.js';
import { loadTask } from '../tasks/loadTask.js';
import { sandboxSpecForTask } from '../images/sandboxSpecForTask.js';
import { verifyInPlace } from '../verifier/runVerifier.js';
import { OpenAIPolicySchema, type PolicyConfig } from '../shared/pipeline.js';
import { TOOL_SCHEMAS, type ChatMessage } from '../shared/tools.js';
import { cpuDelta, processTreeCpu, type CpuTimes } from './procStats.js';

export interface BareRollout {
  totalMs: number;
  provisionMs: number;
  agentMs: number;
  verifyMs: number;
  teardownMs: number;
  turns: number;
  reward: number | null;
  error: string | null;
}

export interface BareBatch {
  rollouts: BareRollout[];
  wallMs: number;
  /** CPU of this process and of the sandbox processes it reaped, over the batch. */
  cpu: CpuTimes;
}

export interface BareOptions {
  provider: LocalSandboxProvider;
  taskDir: string;
  policy: PolicyConfig;
  /** Also mirror the activities' trajectory store and task loading (see the header). */
  store?: FsTrajectoryStore;
  batchId: string;
  maxTurns?: number;
}

async function bareRollout(options: BareOptions, index: number): Promise<BareRollout> {
  const { provider, store } = options;
  const config = OpenAIPolicySchema.parse(options.policy);
  const policy = new OpenAIPolicy(config);
  const ref = `${options.batchId}/bench-echo/${index}`;
  const out: BareRollout = { totalMs: 0, provisionMs: 0, agentMs: 0, verifyMs: 0, teardownMs: 0, turns: 0, reward: null, error: null };
  const started = performance.now();
  let task = loadTask(options.taskDir);
  const spec = sandboxSpecForTask(task, { workflowId: `bare/${ref}`, runId: 'bare', attempt: 0 }, { batch: options.batchId, rollout: String(index) });
  let t = performance.now();
  let handle;
  try {
    ({ handle } = await provider.provision(spec));
  } catch (err) {
    out.error = `provision: ${err instanceof Error ? err.message : String(err)}`;
    out.totalMs = performance.now() - started;
    return out;
  }
  out.provisionMs = performance.now() - t;
  try {
    const messages: ChatMessage[] = [
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: task.instruction },
    ];
    if (store) await store.put(ref, metaName(0), { system: SYSTEM_PROMPT, instruction: task.instruction, tools: TOOL_SCHEMAS, startedAt: new Date().toISOString() } satisfies AttemptMeta);
    t = performance.now();
    const limits = { workdir: task.workdir, commandTimeoutSec: 120, maxOutputBytes: 64 * 1024, remainingMs: 3_600_000 };
    for (let turn = 0; turn < (options.maxTurns ?? 30); turn++) {
      if (store) task = loadTask(options.taskDir);
      const conversation = store ? await loadConversation(store, ref, 0, turn) : messages;
      const callStart = performance.now();
      const response = await policy.next({ messages: conversation, tools: TOOL_SCHEMAS, task, rolloutIndex: index, attempt: 0, turn });
      if (store) await store.put(ref, policyName(0, turn), { turn, latencyMs: performance.now() - callStart, ...response } satisfies PolicyTurnRecord);
      messages.push(response.assistant);
      const calls = response.assistant.tool_calls ?? [];
      for (const [callIndex, call] of calls.entries()) {
        if (call.function.name === 'submit') continue;
        if (store) {
          await store.get<ToolTurnRecord>(ref, toolName(0, turn, callIndex));
          await store.get<PolicyTurnRecord>(ref, policyName(0, turn));
        }
        const outcome = await executeToolCall(provider, handle, call, limits, { key: toolName(0, turn, callIndex) });
        if (store) await store.put(ref, toolName(0, turn, callIndex), { turn, callIndex, ...outcome } satisfies ToolTurnRecord);
        messages.push({ role: 'tool', tool_call_id: call.id, content: outcome.observation });
      }
      out.turns = turn + 1;
      if (calls.length === 0 || calls.some((c) => c.function.name === 'submit')) break;
    }
    out.agentMs = performance.now() - t;
    t = performance.now();
    if (store) task = loadTask(options.taskDir);
    const verified = await verifyInPlace(provider, handle, task);
    if (store) await store.put(ref, 'attempt-00/verify.json', verified);
    out.verifyMs = performance.now() - t;
    out.reward = verified.reward;
  } catch (err) {
    out.error = err instanceof Error ? err.message : String(err);
  } finally {
    t = performance.now();
    await provider.teardown(handle);
    out.teardownMs = performance.now() - t;
    out.totalMs = performance.now() - started;
  }
  return out;
}

/** Runs `count` rollouts at once (or `concurrency` at a time) and times the batch. */
export async function runBareBatch(options: BareOptions, count: number, concurrency = count): Promise<BareBatch> {
  const cpuBefore = processTreeCpu('self');
  const started = performance.now();
  const rollouts: BareRollout[] = new Array<BareRollout>(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(count, concurrency) }, async () => {
      while (next < count) {
        const index = next++;
        rollouts[index] = await bareRollout(options, index);
      }
    }),
  );
  return { rollouts, wallMs: performance.now() - started, cpu: cpuDelta(processTreeCpu('self'), cpuBefore) };
}
