// The framework-neutral view of an HTTP request that the idempotency layer needs.

/** What `begin` reads from a request; adapters build it from their framework's request. */
export interface IdempotentRequest<N = unknown> {
  /** The method, any case (stored upper-case). */
  readonly method: string;
  /**
   * The route the key is scoped to. The adapters use the route the framework matched (Express
   * `req.baseUrl + req.route.path`, Fastify `routeOptions.url`) with its path parameters (`matchedRoute`), and
   * node:http the canonical path (`requestPath`), so every spelling that reaches the same handler shares a key.
   */
  readonly route: string;
  /**
   * The route template for metrics and `onOutcome` (`/payments/:id`): the pattern the framework matched, never the
   * raw path or parameter values, so the series stay few. The Express and Fastify adapters pass the matched
   * pattern; node:http its `routeTemplate` option. Default is `'unmatched'`.
   */
  readonly routeTemplate?: string | undefined;
  /**
   * The query string, with or without its leading `?` (adapters pass the request's). Part of the fingerprint in
   * canonical form (`canonicalQuery`: order of names and `+`/`%20` do not matter), so the same key with other
   * query values is answered 422. Default is no query.
   */
  readonly query?: string | undefined;
  /**
   * Request headers, names lower-case (as node:http gives them). An `idempotency-key` given as an array of
   * more than one value (the adapters pass `requestHeaders(req)`, which keeps repeated Idempotency-Key headers
   * apart where Node would join them into one `a, b`) is answered 400.
   */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** The parsed body (a JSON value), raw bytes, or undefined: part of the fingerprint. */
  readonly body: unknown;
  /**
   * Whether the framework's response has been started by the handler itself (`res.headersSent`, Fastify
   * `reply.sent`). Checked just before the response is stored: when true, nothing is stored, the handler's
   * transaction rolls back, the key is released and `ResponseAlreadySentError` is thrown. Default is never.
   */
  readonly responseStarted?: () => boolean;
  /** The framework's own request, for `principal`. */
  readonly native: N;
}
