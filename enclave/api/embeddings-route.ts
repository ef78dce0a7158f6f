import { badRequest } from '../../common/errors.js';
import type { ApiReply } from '../../common/proto.js';
import { authenticate } from '../auth/caller.js';
import { jsonReply } from './request.js';
import type { CallContext, RouteCall } from './resolve-call.js';
import type { MemoryMeter } from '../memory/meter.js';

export interface EmbeddingsDeps {
  /** The model memories are embedded with: its name, dimension, and one vector per text. */
  model: () => { id: string; dimension: number };
  embed: (texts: string[], meter?: MemoryMeter) => Promise<Float32Array[]>;
}

/** Words, the unit `usage` counts in: the service has no tokenizer shared by its models. */
const words = (text: string) => text.split(/\s+/).filter(Boolean).length;

/**
 * POST /v1/embeddings, OpenAI's shape, from the enclave's embedding model (whatever `model`
 * names: the answer's `model` says which one ran). No tenant; an API key is needed when
 * keys are configured.
 */
export function embeddingsRoute(deps: EmbeddingsDeps) {
  return async ({ caller, body }: RouteCall<'CreateEmbeddings'>, context?: CallContext): Promise<ApiReply> => {
    authenticate(caller);
    const { id, dimension } = deps.model();
    if (body.dimensions !== undefined && body.dimensions !== dimension) {
      throw badRequest(`the embedding model '${id}' gives ${dimension} dimensions; it cannot give ${body.dimensions}`, 'dimensions');
    }
    const texts = typeof body.input === 'string' ? [body.input] : body.input;
    const vectors = await deps.embed(texts, context?.meter);
    const base64 = body.encoding_format === 'base64';
    const tokens = texts.reduce((sum, text) => sum + words(text), 0);
    return jsonReply(200, {
      object: 'list',
      data: vectors.map((vector, index) => ({
        object: 'embedding',
        index,
        embedding: base64 ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64') : Array.from(vector),
      })),
      model: id,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    });
  };
}
