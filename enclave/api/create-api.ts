import { ApiError, internal, notFound } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { ApiReply, ApiRequest } from '../../common/proto.js';
import { apiRoutes, budgetOf, routeLabel, type RouteName } from '../../common/routes.js';
import type { Authorizer } from '../auth/authorizer.js';
import { authorize, type Caller } from '../auth/caller.js';
import type { EnclaveIdentity, SealedRequestKey } from '../keys.js';
import type { ChatService } from '../chat/chat-service.js';
import type { Extractor } from '../chat/extraction.js';
import type { MemoryService } from '../memory/memory-service.js';
import { attestationRoute, type AttestationDeps } from './attestation-route.js';
import { chatRoutes } from './chat-route.js';
import { embeddingsRoute } from './embeddings-route.js';
import { memoryRoutes } from './memory-routes.js';
import { exportRoute, exportUnary } from './export-route.js';
import { modelRoutes, type ModelsDeps } from './models-route.js';
import type { ReplayGuard } from './replay-guard.js';
import { errorReply, requestIdForLog } from './request.js';
import { responsesRoutes } from './responses-route.js';
import { resolveCall, streams, withContext, type CallContext, type RouteCall, type RouteHandler, type RouteHandlers, type StreamHandlers } from './resolve-call.js';
import { sealedRoute } from './sealed-route.js';
import { sealedStreamRoute, sealedStreamUnary } from './sealed-stream-route.js';
import { deletionReceipt, errorTenant, signReply, type ResponseSigner, type SignedState } from './signing.js';
import { HTTP_METHOD, TENANT_HEADER } from '../../protocol/response-signature.js';
import { WorkGate, type Place, type WorkLimits } from './work-gate.js';
import { NO_METER } from '../memory/meter.js';
import { sendReply, wrapStream, type ChunkSink, type StreamHandler } from './stream.js';

export type { CallContext };
export type Handler = (request: ApiRequest, context?: CallContext) => Promise<ApiReply>;
export type { StreamHandler };

/** What the two RPCs of protos/enclave.proto that carry API requests hand their requests to. */
export interface EnclaveApi {
  /** A request whose answer does not stream (each request of the Exchange stream). */
  Call: Handler;
  CallStream: StreamHandler;
  /** Requests holding a place in the work gate now (metrics). */
  inFlight(): number;
}

/**
 * Told of every request answered, for metrics (enclave/observability/metrics.ts): the
 * route's name in the route table ('unknown' when none), never anything from the request.
 */
export interface ApiObserver {
  handled(route: string, status: number, seconds: number, streamed: boolean): void;
}

export interface ApiDeps {
  memory: MemoryService;
  attestation: AttestationDeps;
  /** Signs every reply (enclave/api/signing.ts). */
  identity: EnclaveIdentity;
  /** The store's head, id and chain of heads, reported in every signed reply. */
  state: SignedState;
  sealed: { key: SealedRequestKey; replay: ReplayGuard };
  auth: Authorizer;
  work: WorkLimits;
  chat: ChatService;
  /** Memories extracted from a conversation (POST /v1/memory with infer: true). */
  extraction?: Extractor;
  models: Omit<ModelsDeps, 'embeddingModel' | 'authenticate'>;
  log: Logger;
  observer?: ApiObserver;
}

/**
 * The enclave's API: every request is resolved to its route (common/routes.ts) and its
 * inputs validated, then served by the route's handler. Every handler answers with a
 * complete reply: refusals become OpenAI-shaped error bodies here, and anything unexpected
 * becomes a bare 500 (details go to the log, never to the caller). Every call takes a place
 * in one WorkGate (a bounded number at once, each within its time limit), and every reply,
 * errors included, leaves signed by the enclave's key. POST /v1/sealed opens a sealed
 * request and serves it the same way, within the sealed call's place.
 */
/** Whether `caller` holds a key for `tenant` (or keys are off): authorize() without the refusal. */
function mayActFor(caller: Caller, tenant: string): boolean {
  try {
    authorize(caller, tenant);
    return true;
  } catch {
    return false;
  }
}

export function createApi(deps: ApiDeps): EnclaveApi {
  const gate = new WorkGate(deps.work);
  const shareOf = (caller: Caller) => gate.shareOf(caller.keyId, deps.auth.required);
  const signer: ResponseSigner = { ...deps.identity, state: deps.state };
  const sign = (request: ApiRequest, reply: ApiReply) => signReply(signer, request.method, request, reply);
  // Routes that wait on the model are bounded by its own timeouts and the caller's deadline;
  // ENCLAVE_TIMEOUT_MS bounds the enclave's own work.
  const timeLimit = (name: RouteName, body: unknown) => (budgetOf(apiRoutes[name], body) === 'model' ? Infinity : undefined);

  const memory = memoryRoutes(deps.memory, (deletion) => deletionReceipt(signer, deletion), deps.extraction);
  const chat = chatRoutes(deps.chat, deps.extraction);
  const responses = responsesRoutes(deps.chat);
  const handlers: RouteHandlers = {
    ...memory,
    ...modelRoutes({ ...deps.models, embeddingModel: () => deps.memory.embeddingModel.id }),
    GetAttestation: attestationRoute(deps.attestation),
    ChatCompletion: chat.complete,
    CreateResponse: responses.complete,
    CreateEmbeddings: embeddingsRoute({ model: () => deps.memory.embeddingModel, embed: (texts, meter) => deps.memory.embed(texts, meter) }),
    // A sealed request cannot nest another sealed request.
    Sealed: (call, context) => sealed(call, context),
    SealedStream: sealedStreamUnary,
    ExportMemories: exportUnary,
  };
  const streamHandlers: StreamHandlers = {
    ChatCompletion: chat.stream,
    CreateResponse: responses.stream,
    SealedStream: (call, sink, signal, context) => sealedStream(call, sink, signal, context),
    ExportMemories: exportRoute(deps.memory),
  };
  const run = <N extends RouteName>(name: N, call: RouteCall<N>, context?: CallContext) =>
    (handlers[name] as RouteHandler<N>)(call, context);

  /**
   * Resolves, runs and signs one request, turning whatever was thrown into a reply. The
   * request inside a sealed call is `inner`: it takes no second place in the gate, and it is
   * not logged, since its route and status would tell the host (which reads the log and
   * chose the request id) what the sealed call did; an unexpected failure inside is logged
   * without naming the route.
   */
  const sealableOnly = (name: RouteName) => {
    if (!apiRoutes[name].sealable) throw notFound(`${apiRoutes[name].path} cannot be sent inside a sealed request`, 'unknown_route');
  };

  /**
   * Only a hostile host sends a method that is not one: it is answered (404/405) and signed
   * as INVALID, which no client's own request matches.
   */
  const withMethod = (request: ApiRequest): ApiRequest => (HTTP_METHOD.test(request.method) ? request : { ...request, method: 'INVALID' });

  const serve = (inner: boolean) => async (given: ApiRequest, context?: CallContext, known?: Caller): Promise<ApiReply> => {
    const started = performance.now();
    const request = withMethod(given);
    // The request's one key lookup (the inner request of a sealed call: the one its envelope's admission made).
    const caller = known ?? deps.auth.identify(request.authorization);
    let name: RouteName | undefined;
    let reply: ApiReply;
    let cancelled = false;
    try {
      const resolved = resolveCall(request, caller, inner ? sealableOnly : undefined);
      name = resolved.name;
      if (inner) {
        // The sealed call's place now counts for the key inside the envelope (429 when that key is at its share).
        context?.place?.moveTo(shareOf(caller));
        // Its embeds and searches are counted nowhere: /metrics must not show what it did.
        reply = await run(resolved.name, resolved.call, withContext(context, { meter: NO_METER }));
      } else {
        // Each API key gets a fair share of the gate, counted by the key it matched.
        reply = await gate.run((place) => run(resolved.name, resolved.call, withContext(context, { place })), context?.deadline, timeLimit(resolved.name, resolved.call.body), shareOf(caller));
      }
    } catch (err) {
      if (err instanceof ApiError) {
        reply = errorReply(err);
        // Signed with the shard of the tenant it is about, when this enclave serves it (signing.ts).
        const tenant = errorTenant(deps.state, request, (t) => mayActFor(caller, t));
        if (tenant !== undefined) reply.headers = Object.assign({}, reply.headers, { [TENANT_HEADER]: tenant });
      } else if (context?.signal?.aborted) {
        // The caller went away (e.g. its HTTP client hung up) and the work was abandoned: no one reads this reply.
        cancelled = true;
        reply = errorReply(internal('cancelled'));
      } else {
        (inner ? deps.log.child({ route: 'Sealed (inner request)' }) : deps.log.child({ reqId: requestIdForLog(request.request_id), route: name }))
          .error({ err }, 'unexpected error');
        reply = errorReply(internal());
      }
    }
    // Like the log, the metrics never see the request inside a sealed call: it counts once, as Sealed.
    if (!inner) {
      const route = name ?? routeLabel(request.method, request.target);
      // One call, no child logger per request, and nothing built when info is not logged.
      if (deps.log.isLevelEnabled('info')) {
        deps.log.info({ reqId: requestIdForLog(request.request_id), route, status: reply.status, cancelled: cancelled || undefined, ms: Math.round(performance.now() - started) }, 'handled');
      }
      deps.observer?.handled(route, reply.status ?? 0, (performance.now() - started) / 1000, false);
    }
    // A sealed call's 200 is the boxed answer, authenticated by the box and signed inside:
    // a second signature outside would only cost time. Its refusals are signed like any reply.
    if (name === 'Sealed' && reply.status === 200) return reply;
    return sign(request, reply);
  };

  const sealed = sealedRoute({
    ...deps.sealed,
    identify: (a) => deps.auth.identify(a),
    dispatch: (request, caller, context) => serve(true)(request, context, caller),
  });

  type AnyStreamHandler = (c: RouteCall<RouteName>, s: ChunkSink, a: AbortSignal, context?: CallContext) => Promise<void>;

  /**
   * The request inside a sealed stream, answered as the streaming call would answer it
   * plainly (signed; refusals as replies), within the sealed call's place, which now counts
   * for the key inside. Not logged and not metered, like a sealed call's inner request.
   */
  const innerStream = (request: ApiRequest, caller: Caller, sink: ChunkSink, signal: AbortSignal, place?: Place) => wrapStream(async (inner, c, s, sig) => {
    const { name, call } = resolveCall(withMethod(inner), c, sealableOnly);
    place?.moveTo(shareOf(c));
    const context: CallContext = { signal: sig, place, meter: NO_METER };
    if (streams(name)) await (streamHandlers[name] as AnyStreamHandler)(call, s, sig, context);
    else await sendReply(s, await run(name, call, context));
  }, { log: deps.log, signer, identify: () => caller, gate: (work) => work(), inner: true, maxStreamMs: deps.work.maxStreamMs })(request, sink, signal);

  const sealedStream = sealedStreamRoute({
    ...deps.sealed,
    identify: (a) => deps.auth.identify(a),
    dispatch: innerStream,
  });

  const streamed = wrapStream(async (request, caller, sink, signal, place) => {
    const { name, call } = resolveCall(request, caller);
    if (streams(name)) await (streamHandlers[name] as AnyStreamHandler)(call, sink, signal, { signal, place });
    else await sendReply(sink, await run(name, call, { signal }));
  }, {
    log: deps.log,
    signer,
    identify: (request) => deps.auth.identify(request.authorization),
    gate: (work, deadline, caller) => gate.run((place) => work(place), deadline, Infinity, shareOf(caller)),
    maxStreamMs: deps.work.maxStreamMs,
    observe: (route, status, seconds) => deps.observer?.handled(route, status, seconds, true),
    boxed: (route, status) => route === 'SealedStream' && status === 200,
  });

  return {
    Call: serve(false),
    CallStream: (request, sink, signal, deadline) => streamed(withMethod(request), sink, signal, deadline),
    inFlight: () => gate.inFlight,
  };
}
