import type { ChatMessage } from '../../common/chat-schema.js';
import { ApiError } from '../../common/errors.js';

/**
 * Puts a chat request in the form the rest of the enclave and any OpenAI-compatible model
 * read: content given as text parts becomes one string (parts joined by a blank line), and
 * role `developer` (what current OpenAI clients send for instructions) becomes `system`,
 * which every compatible server knows and OpenAI treats the same. Parts other than text
 * (images, audio, files) are refused with a 400 naming the part: the service works on text.
 */
export function normalizeChat<T extends { messages: ChatMessage[] }>(request: T): T {
  const messages = request.messages.map((message, i): ChatMessage => {
    const role = message.role === 'developer' ? 'system' : message.role;
    if (!Array.isArray(message.content)) return role === message.role ? message : { ...message, role };
    const texts = message.content.map((part, j) => {
      if (part.type !== 'text' || typeof part.text !== 'string') {
        throw new ApiError('unsupported_content', `messages.${i}.content.${j} is a '${part.type}' part; only text parts are supported`, {
          param: `messages.${i}.content.${j}.type`,
        });
      }
      return part.text;
    });
    return { ...message, role, content: texts.join('\n\n') };
  });
  return { ...request, messages };
}
