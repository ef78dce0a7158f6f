import { ApiError } from '../../common/errors.js';
import type { ApiReply } from '../../common/proto.js';
import { authenticate } from '../auth/caller.js';
import { jsonReply } from './request.js';
import type { RouteHandler } from './resolve-call.js';

export interface ModelsDeps {
  /** The upstream chat models the operator lists (MODEL_NAMES); chat passes any name through. */
  chatModels: readonly string[];
  /** The offline responder (local-memory): it answers chat without MODEL_BASE_URL, and whenever a request names it. */
  offlineModel: string;
  /** The embedding model's name, as POST /v1/embeddings reports it. */
  embeddingModel: () => string;
  /** Unix seconds: when the enclave started. */
  created: number;
}

/** GET /v1/models and /v1/models/{id}, in OpenAI's shape; like OpenAI's, they need an API key when keys are configured. */
export function modelRoutes(deps: ModelsDeps): { ListModels: RouteHandler<'ListModels'>; GetModel: RouteHandler<'GetModel'> } {
  const models = () => {
    const model = (id: string, owned_by: string) => ({ id, object: 'model', created: deps.created, owned_by });
    const list = deps.chatModels.map((id) => model(id, 'upstream'));
    list.push(model(deps.offlineModel, 'enclave'));
    list.push(model(deps.embeddingModel(), 'enclave'));
    return list;
  };
  return {
    async ListModels({ caller }): Promise<ApiReply> {
      authenticate(caller);
      return jsonReply(200, { object: 'list', data: models() });
    },
    async GetModel({ caller, params: { id } }): Promise<ApiReply> {
      authenticate(caller);
      const found = models().find((m) => m.id === id);
      if (!found) throw new ApiError('model_not_found', `the model '${id}' does not exist`, { param: 'model' });
      return jsonReply(200, found);
    },
  };
}
