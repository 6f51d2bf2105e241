// @inboxkit/http: the inbox's guarantee at the HTTP edge. The Idempotency-Key protocol on Postgres,
// framework-neutral; adapters for node:http, Express and Fastify are sub-path exports.

export { idempotencyKeys, IDEMPOTENCY_KEY_HEADER, type IdempotencyKeys } from './idempotency-keys.js';
export type {
  IdempotencyKeysConfig,
  ResolvedIdempotencyKeysConfig,
  PrincipalResult,
  IdempotencyKeySource,
  KeyReader,
} from './idempotency-keys-config.js';
export type {
  IdempotencyDecision,
  ProceedDecision,
  UnkeyedDecision,
  AnsweredDecision,
} from './idempotency-decision.js';
export type { IdempotentRequest } from './idempotent-request.js';
export {
  toHttpResponse,
  problemResponse,
  unsendableHeaderReason,
  type HttpResponse,
  type IdempotentResponseInit,
} from './http-response.js';
export { runIdempotent, type IdempotencyContext, type IdempotentRouteOptions } from './run-idempotent.js';
export {
  HTTP_METRIC_NAMES,
  type IdempotencyOutcome,
  type IdempotencyOutcomeEvent,
  type IdempotencyOutcomeHook,
} from './idempotency-key-metrics.js';
export { requestFingerprint } from './request-fingerprint.js';
export { requestPath } from './request-path.js';
export { canonicalQuery } from './canonical-query.js';
export { matchedRoute } from './matched-route.js';
export {
  InvalidResponseError,
  ResponseAlreadySentError,
  ResponseTooLargeError,
} from './idempotency-errors.js';
export { requestHeaders } from './request-headers.js';
export {
  idempotencyKeyMigrations,
  migrateIdempotencyKeys,
  type MigrateIdempotencyKeysOptions,
} from './idempotency-key-migrations.js';
export {
  idempotencyKeySchemaSql,
  idempotencyKeySchemaStatements,
  idempotencyKeySchemaDownStatements,
} from './idempotency-key-schema.js';
export {
  resolveIdempotencyKeyTableNames,
  type IdempotencyKeyTableOptions,
} from './idempotency-key-table-names.js';
export { pruneIdempotencyKeys, type PruneIdempotencyKeysOptions } from './prune-idempotency-keys.js';
export {
  startIdempotencyKeyPruner,
  type IdempotencyKeyPrunerOptions,
} from './start-idempotency-key-pruner.js';
