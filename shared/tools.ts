/**
 * The tools the agent may call, as OpenAI function-calling schemas. They are
 * part of the experiment record (their hash), so changing one is a new
 * experiment. No dependencies.
 */

export const TOOL_NAMES = ['bash', 'read_file', 'write_file', 'submit'] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

/**
 * Where the tool calls of an answer are read from (policies/toolCallParsing/):
 * - server:      the server's own `tool_calls` (its parser read the model's text);
 * - fenced-json: ```json blocks holding {"name": ..., "arguments": {...}} in the content;
 * - hermes-tags: <tool_call>{"name": ..., "arguments": {...}}</tool_call> in the content;
 * - bare-json:   content that is nothing but such an object (or an array of them).
 */
export const TOOL_CALL_PARSERS = ['server', 'fenced-json', 'hermes-tags', 'bare-json'] as const;
export type ToolCallParserName = (typeof TOOL_CALL_PARSERS)[number];

export interface ToolSchema {
  type: 'function';
  function: { name: ToolName; description: string; parameters: Record<string, unknown> };
}

export const TOOL_SCHEMAS: readonly ToolSchema[] = [
  {
    type: 'function',
    function: {
      name: 'bash',
      description: 'Run a bash command in the task environment (working directory: the workspace). Returns exit code, stdout and stderr.',
      parameters: {
        type: 'object',
        properties: {
          command: { type: 'string', description: 'The command line to run with bash -c.' },
          timeout_sec: { type: 'number', description: 'Seconds before the command is killed (capped by the pipeline limit).' },
        },
        required: ['command'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'read_file',
      description: 'Read a text file from the task environment.',
      parameters: {
        type: 'object',
        properties: { path: { type: 'string', description: 'Absolute path, or relative to the workspace.' } },
        required: ['path'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'write_file',
      description: 'Write a text file in the task environment, creating parent directories; replaces an existing file.',
      parameters: {
        type: 'object',
        properties: {
          path: { type: 'string', description: 'Absolute path, or relative to the workspace.' },
          content: { type: 'string', description: 'The whole new content of the file.' },
        },
        required: ['path', 'content'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'submit',
      description: 'Declare the task done. The environment is then verified; no further tool calls run.',
      parameters: { type: 'object', properties: {}, additionalProperties: false },
    },
  },
];

/** A tool call as the policy returned it (OpenAI wire format; arguments are a JSON string). */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface AssistantMessage {
  role: 'assistant';
  content: string | null;
  tool_calls?: ToolCall[];
}

export interface ToolMessage {
  role: 'tool';
  tool_call_id: string;
  content: string;
}

export type ChatMessage = { role: 'system' | 'user'; content: string } | AssistantMessage | ToolMessage;
