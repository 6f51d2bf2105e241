// The framework-neutral view of an HTTP request that the idempotency layer needs.

/** What `begin` reads from a request; adapters build it from their framework's request. */
export interface IdempotentRequest<N = unknown> {
  /** The method, any case (stored upper-case). */
  readonly method: string;
  /** The route the key is scoped to (the adapters use the path without the query string). */
  readonly route: string;
  /** Request headers, names lower-case (as node:http gives them). */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** The parsed body (a JSON value), raw bytes, or undefined: part of the fingerprint. */
  readonly body: unknown;
  /** The framework's own request, for `principal`. */
  readonly native: N;
}
