/** What the real-model demos (demo:model, demo:train) send to llama.cpp serving Qwen2.5-Coder-0.5B. */
import type { ToolCallParserName } from '../../shared/tools.js';

export const DEMO_MODEL_NAME = 'qwen2.5-coder-0.5b-instruct-q4_k_m';
/** Qwen 0.5B writes calls as ```json blocks or bare JSON; the server reads most of them, the text parsers the rest. */
export const DEMO_TOOL_CALL_PARSERS: ToolCallParserName[] = ['server', 'fenced-json', 'hermes-tags', 'bare-json'];
