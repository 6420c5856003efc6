/**
 * Deterministic policies for tests and the demo. They answer in the same
 * OpenAI tool-calling format as a model, so trajectories look the same.
 */
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { z } from 'zod';
import type { ScriptedPolicySchema } from '../shared/pipeline.js';
import type { LoadedTask } from '../shared/task.js';
import type { AssistantMessage, ToolCall } from '../shared/tools.js';
import { listFiles } from '../shared/hashTree.js';
import { adversarialStep } from './adversarial/adversarialPolicy.js';
import type { PolicyClient, PolicyRequest, PolicyResponse } from './policyClient.js';

type Script = z.infer<typeof ScriptedPolicySchema>['script'];

function call(turn: number, i: number, name: string, args: Record<string, unknown>): ToolCall {
  return { id: `call_${turn}_${i}`, type: 'function', function: { name, arguments: JSON.stringify(args) } };
}

/** Turn 0 uploads the script(s), turn 1 runs them, turn 2 submits. */
function runScript(turn: number, files: { path: string; content: string }[]): AssistantMessage {
  if (turn === 0) return { role: 'assistant', content: 'Writing the solution script.', tool_calls: files.map((f, i) => call(turn, i, 'write_file', f)) };
  if (turn === 1) return { role: 'assistant', content: 'Running it.', tool_calls: [call(turn, 0, 'bash', { command: 'bash /solution/solve.sh' })] };
  return { role: 'assistant', content: 'Done.', tool_calls: [call(turn, 0, 'submit', {})] };
}

function referenceFiles(task: LoadedTask): { path: string; content: string }[] {
  if (!task.solutionScript) throw new Error(`task ${task.id} has no solution/solve.sh for the oracle policy`);
  const dir = join(task.dir, 'solution');
  return listFiles(dir).map((f) => ({ path: `/solution/${relative(dir, f)}`, content: readFileSync(f, 'utf8') }));
}

export class ScriptedPolicy implements PolicyClient {
  constructor(private readonly script: Script) {}

  async next(request: PolicyRequest): Promise<PolicyResponse> {
    return { assistant: this.decide(request), model: `scripted:${this.script}`, finishReason: 'tool_calls', usage: null };
  }

  private decide({ task, turn, rolloutIndex }: PolicyRequest): AssistantMessage {
    switch (this.script) {
      case 'noop':
        return { role: 'assistant', content: 'Submitting without changes.', tool_calls: [call(turn, 0, 'submit', {})] };
      case 'stall':
        return { role: 'assistant', content: 'Thinking.', tool_calls: [call(turn, 0, 'bash', { command: 'true' })] };
      case 'oracle':
        return runScript(turn, referenceFiles(task));
      case 'mixed': {
        if (rolloutIndex % 2 === 0) return runScript(turn, referenceFiles(task));
        const bad = task.knownBadScripts[Math.floor(rolloutIndex / 2) % Math.max(1, task.knownBadScripts.length)];
        if (!bad) return { role: 'assistant', content: 'Submitting without changes.', tool_calls: [call(turn, 0, 'submit', {})] };
        return runScript(turn, [{ path: '/solution/solve.sh', content: readFileSync(bad, 'utf8') }]);
      }
      case 'adversarial':
        return adversarialStep(task, rolloutIndex, turn);
    }
  }
}
