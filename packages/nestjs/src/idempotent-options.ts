// The options of @Idempotent() and the metadata key they are kept under.

import type { IdempotencyKeysConfig } from '@inboxkit/http';

/** Options of `@Idempotent()`. */
export interface IdempotentOptions {
  /** Whether a request without a key is refused with 400. Default is the module's `idempotency.required` (true). */
  readonly required?: boolean;
  /**
   * Where this route's key comes from, instead of the module's `idempotency.key`: `'header'`, `{ bodyField }`
   * or a function of the request (`request.native` is Express' or Fastify's request).
   *
   * @example
   * @Idempotent({ key: (r) => (r.native as Request).headers['x-request-id'] as string | undefined })
   */
  readonly key?: IdempotencyKeysConfig<unknown, unknown>['key'];
  /**
   * What makes two requests under one key the same request on this route, instead of the module's
   * `idempotency.fingerprint`: `{ exclude }`, `{ include }` (dot paths into the body) or a function.
   *
   * @example
   * @Idempotent({ fingerprint: { exclude: ['sentAt'] } })
   */
  readonly fingerprint?: IdempotencyKeysConfig<unknown, unknown>['fingerprint'];
}

/** The metadata key of `@Idempotent()`'s options. */
export const IDEMPOTENT_ROUTE = Symbol.for('inboxkit.nestjs.idempotent-route');
