/** Parses and checks a tool call's JSON arguments; a problem is reported to the policy, not thrown. */
import { z } from 'zod';
import { TOOL_NAMES, type ToolCall, type ToolName } from '../shared/tools.js';

const ArgumentSchemas = {
  bash: z.object({ command: z.string().min(1), timeout_sec: z.number().positive().optional() }),
  read_file: z.object({ path: z.string().min(1) }),
  write_file: z.object({ path: z.string().min(1), content: z.string() }),
  submit: z.object({}).loose(),
};

export type ParsedToolCall =
  | { ok: true; name: 'bash'; args: z.infer<typeof ArgumentSchemas.bash> }
  | { ok: true; name: 'read_file'; args: z.infer<typeof ArgumentSchemas.read_file> }
  | { ok: true; name: 'write_file'; args: z.infer<typeof ArgumentSchemas.write_file> }
  | { ok: true; name: 'submit'; args: Record<string, unknown> }
  | { ok: false; name: string; error: string };

export function parseToolCall(call: ToolCall): ParsedToolCall {
  const name = call.function.name;
  if (!(TOOL_NAMES as readonly string[]).includes(name)) {
    return { ok: false, name, error: `unknown tool ${JSON.stringify(name)}; the tools are ${TOOL_NAMES.join(', ')}` };
  }
  let raw: unknown;
  try {
    raw = call.function.arguments.trim() === '' ? {} : JSON.parse(call.function.arguments);
  } catch (err) {
    return { ok: false, name, error: `the arguments are not valid JSON (${(err as Error).message}); send a JSON object` };
  }
  const schema = ArgumentSchemas[name as ToolName];
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    return { ok: false, name, error: `invalid arguments for ${name}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}` };
  }
  return { ok: true, name, args: parsed.data } as ParsedToolCall;
}

/** A one-line description of a call for workflow history and the UI, e.g. `bash: pytest -x`. */
export function summarizeToolCall(call: ToolCall): string {
  const parsed = parseToolCall(call);
  if (!parsed.ok) return `${parsed.name}: (malformed)`;
  const detail = parsed.name === 'bash' ? parsed.args.command : parsed.name === 'submit' ? '' : parsed.args.path;
  const oneLine = detail.replace(/\s+/g, ' ').trim();
  return oneLine ? `${parsed.name}: ${oneLine.length > 80 ? `${oneLine.slice(0, 77)}...` : oneLine}` : parsed.name;
}
