/**
 * Reads the chat template a pipeline-mode batch renders with
 * (`tokens.chatTemplate`, `rollout run --chat-template FILE`) and checks it
 * before anything starts: the file must be readable, be a Jinja template the
 * pipeline can render, show the tools and every message, and render new
 * messages as a continuation (chatTemplateProblem). The result carries the
 * text and its sha256 in the workflow input, so workers need no file.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { chatTemplateProblem } from '../../policies/tokens/chatTemplate/configuredTemplate.js';
import type { ChatTemplate } from '../../shared/tokens.js';

const FIX =
  "Fix: give a Jinja chat template for the model you serve (e.g. the GGUF's own, which `servers/inference/llama_server.py --template-out FILE` writes), or leave tokens.chatTemplate out to render with the server's template";

export class ChatTemplateError extends Error {
  override readonly name = 'ChatTemplateError';
}

export function loadChatTemplate(file: string): ChatTemplate {
  const path = resolve(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ChatTemplateError(`chat template ${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}). ${FIX}`);
  }
  if (text.trim() === '') throw new ChatTemplateError(`chat template ${path} is empty. ${FIX}`);
  const problem = chatTemplateProblem(text);
  if (problem) throw new ChatTemplateError(`chat template ${path}: ${problem}. ${FIX}`);
  return { file: path, sha256: createHash('sha256').update(text).digest('hex'), text };
}
