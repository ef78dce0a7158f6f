/**
 * Documented limits of the API. Both processes read them from here: the proxy to
 * refuse early, the enclave to refuse again (it does not trust the proxy).
 */
export const limits = {
  /** Largest request body the proxy reads, in bytes. */
  maxBodyBytes: 1024 * 1024,
  /**
   * Deepest nesting of arrays and objects in a JSON body. Fields passed on to the model
   * (tool parameters, response_format) are re-serialised, and JSON.stringify recurses: a
   * body nested thousands deep would overflow the stack there instead of being refused.
   */
  maxJsonDepth: 64,
  /**
   * Largest POST /v1/sealed envelope, in bytes: a body of maxBodyBytes with its head line
   * (at most ~110 KB: target, authorization and known state, JSON-escaped), padded to a
   * multiple of 64 KiB, and the 72 bytes of key, nonce and MAC come to 1.13 MiB at most.
   */
  maxSealedEnvelopeBytes: 1280 * 1024,
  /** Longest memory content, in characters. */
  maxContentChars: 32 * 1024,
  /** Longest memory query, in characters. */
  maxQueryChars: 4 * 1024,
  /** tenant_id: 1–128 characters from [A-Za-z0-9._:@-]. */
  maxTenantIdChars: 128,
  tenantIdPattern: '^[A-Za-z0-9._:@-]{1,128}$',
  /** metadata: at most 16 keys of at most 64 characters; values are strings (≤ 512 characters), numbers, booleans or null. */
  maxMetadataKeys: 16,
  maxMetadataKeyChars: 64,
  maxMetadataValueChars: 512,
  /** Memories in one batch POST /v1/memory (`{"memories": [...]}`), all embedded in one ONNX run. */
  maxBatchMemories: 100,
  /** top_k for memory queries. */
  defaultTopK: 5,
  maxTopK: 100,
  /** Listing memories (GET /v1/memory without a query): page size, default and most. */
  defaultListLimit: 20,
  maxListLimit: 100,
  /** Values in one `{"$in": [...]}` metadata filter. */
  maxFilterValues: 100,
  /** Texts in one POST /v1/embeddings, all embedded in one ONNX run. */
  maxEmbeddingInputs: 100,
  /** Chat completions: messages per request, tools per request. */
  maxChatMessages: 2048,
  maxChatTools: 128,
} as const;
