/**
 * Tool calls that a model wrote as text in its answer's content, for servers
 * whose own parser misses them. Each parser returns the calls it found and the
 * content left once they are taken out. A call cut off before its end (the
 * answer hit max_tokens) is still returned, with its partial arguments, so it
 * becomes a malformed call the model is told about and pays for.
 *
 * The shapes are the ones Qwen2.5-Coder-0.5B writes on llama.cpp:
 *   ```json\n{"name": "bash", "arguments": {"command": "ls"}}\n```
 *   <tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>
 *   {"name": "bash", "arguments": {"command": "ls"}}          (the whole content)
 * `parameters` is read like `arguments`; a JSON array holds several calls.
 */

export interface TextToolCall {
  name: string;
  /** A JSON string when the call was complete; the raw text when it was cut off or invalid. */
  arguments: string;
}

export interface TextParse {
  calls: TextToolCall[];
  /** The content without the text of the calls, trimmed; null when nothing else was said. */
  rest: string | null;
}

const NOTHING: TextParse = { calls: [], rest: null };

function callsFromJson(value: unknown): TextToolCall[] | undefined {
  const items = Array.isArray(value) ? value : [value];
  if (items.length === 0) return undefined;
  const calls: TextToolCall[] = [];
  for (const item of items) {
    if (typeof item !== 'object' || item === null || typeof (item as { name?: unknown }).name !== 'string') return undefined;
    const { name, arguments: args, parameters } = item as { name: string; arguments?: unknown; parameters?: unknown };
    const given = args ?? parameters ?? {};
    calls.push({ name, arguments: typeof given === 'string' ? given : JSON.stringify(given) });
  }
  return calls;
}

/** A call's text that does not parse: complete JSON with no name is no call; a cut-off one keeps its raw arguments. */
function cutOffCall(body: string): TextToolCall | undefined {
  const name = /"name"\s*:\s*"([^"]*)"?/.exec(body);
  if (!name) return undefined;
  const args = /"(?:arguments|parameters)"\s*:\s*([\s\S]*)$/.exec(body);
  return { name: name[1] ?? '', arguments: (args?.[1] ?? '').replace(/\}\s*$/, '').trim() || body.trim() };
}

function readBody(body: string, unterminated: boolean): TextToolCall[] | undefined {
  try {
    return callsFromJson(JSON.parse(body));
  } catch {
    const cut = cutOffCall(body);
    // A complete block that is not JSON is text the model showed, unless it names a call.
    return cut && (unterminated || /"(?:arguments|parameters)"/.test(body)) ? [cut] : undefined;
  }
}

function restOf(content: string, spans: [number, number][]): string | null {
  let rest = '';
  let at = 0;
  for (const [start, end] of spans) {
    rest += content.slice(at, start);
    at = end;
  }
  rest = (rest + content.slice(at)).trim();
  return rest === '' ? null : rest;
}

/**
 * Blocks opened by `open` and closed by `close` (the last one may be cut off at the end of the
 * content); blocks whose opening `isCall` rejects are skipped whole, closing delimiter included.
 */
function parseDelimited(content: string, open: RegExp, close: string, isCall: (opening: RegExpExecArray) => boolean = () => true): TextParse {
  const calls: TextToolCall[] = [];
  const spans: [number, number][] = [];
  const opener = new RegExp(open.source, 'g');
  let match: RegExpExecArray | null;
  while ((match = opener.exec(content)) !== null) {
    const bodyStart = match.index + match[0].length;
    const closeAt = content.indexOf(close, bodyStart);
    const unterminated = closeAt < 0;
    const bodyEnd = unterminated ? content.length : closeAt;
    const found = isCall(match) ? readBody(content.slice(bodyStart, bodyEnd), unterminated) : undefined;
    const end = unterminated ? content.length : closeAt + close.length;
    if (found) {
      calls.push(...found);
      spans.push([match.index, end]);
    }
    opener.lastIndex = end;
  }
  return calls.length > 0 ? { calls, rest: restOf(content, spans) } : NOTHING;
}

export function parseFencedJson(content: string): TextParse {
  // ```json (or a bare ```) opening a line; other languages (```bash) are code the model shows, not calls.
  return parseDelimited(content, /```([\w+-]*)[ \t]*\r?\n/, '```', (opening) => opening[1] === '' || opening[1]?.toLowerCase() === 'json');
}

export function parseHermesTags(content: string): TextParse {
  return parseDelimited(content, /<tool_call>/, '</tool_call>');
}

export function parseBareJson(content: string): TextParse {
  const text = content.trim();
  if (!text.startsWith('{') && !text.startsWith('[')) return NOTHING;
  const found = readBody(text, true);
  return found ? { calls: found, rest: null } : NOTHING;
}
