/**
 * What token-level mode renders prompts with, and how a turn records it: the
 * configured template (tokens.chatTemplate, rendered here, checked against its
 * sha256 first) or the server's own (/apply-template; its sha256 from the
 * template /props reports, when it reports one).
 */
import { createHash } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { failureName } from '../../../shared/failures.js';
import type { ChatTemplate, TurnTokens } from '../../../shared/tokens.js';
import type { RenderPrompt } from '../nextPromptIds.js';
import type { ServerEndpoints } from '../serverEndpoints.js';
import { ConfiguredTemplate } from './configuredTemplate.js';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
const compiled = new Map<string, ConfiguredTemplate>();

function configError(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: failureName({ failureClass: 'infra', type: 'policy_unavailable' }), message, nonRetryable: true });
}

export interface PromptRenderer {
  render: RenderPrompt;
  /** Recorded on every turn's tokens. */
  template: () => Promise<TurnTokens['chatTemplate']>;
}

export function promptRenderer(endpoints: ServerEndpoints, configured: string | ChatTemplate | undefined): PromptRenderer {
  if (configured === undefined) {
    return {
      render: (messages, tools) => endpoints.applyTemplate(messages, tools),
      template: async () => {
        const served = (await endpoints.props()).chatTemplate;
        return served === undefined ? undefined : { source: 'server', sha256: sha256(served) };
      },
    };
  }
  if (typeof configured === 'string') {
    throw configError(`tokens.chatTemplate is the file path ${configured}, not the template: submit through submitBatch or \`rollout run --chat-template\`, which read the file and send its text`);
  }
  if (sha256(configured.text) !== configured.sha256) throw configError(`tokens.chatTemplate from ${configured.file}: its text does not match its sha256 ${configured.sha256}; submit the batch again`);
  let template = compiled.get(configured.sha256);
  if (!template) {
    try {
      template = new ConfiguredTemplate(configured.text);
    } catch (err) {
      throw configError(`chat template ${configured.file}: ${(err as Error).message}`);
    }
    compiled.set(configured.sha256, template);
  }
  const chosen = template;
  return {
    render: async (messages, tools) => {
      const props = await endpoints.props();
      try {
        return chosen.render(messages, tools, props);
      } catch (err) {
        throw configError(
          `chat template ${configured.file} (sha256 ${configured.sha256.slice(0, 12)}) failed to render this conversation: ${(err as Error).message}. Fix the template or leave tokens.chatTemplate out`,
        );
      }
    },
    template: () => Promise.resolve({ source: 'configured', sha256: configured.sha256, file: configured.file }),
  };
}
