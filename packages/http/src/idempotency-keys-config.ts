// The configuration of idempotencyKeys(), validated once and frozen.

import {
  checkFastPath,
  checkFingerprintResolver,
  ConfigurationError,
  type CheckedFingerprintResolver,
  type FastPath,
  type FingerprintResolver,
  type Logger,
} from '@inboxkit/core';
import type { MeterProvider } from '@opentelemetry/api';
import type { Kysely } from 'kysely';
import type { IdempotentRequest } from './idempotent-request.js';
import type { IdempotencyOutcomeHook } from './idempotency-key-metrics.js';
import {
  resolveIdempotencyKeyTableNames,
  type IdempotencyKeyTableOptions,
} from './idempotency-key-table-names.js';
import { kyselySeam, type InboxTableNames, type SqlSeam } from '@inboxkit/core/postgres';
import type { Transaction } from 'kysely';

/** What `principal` returns: the owner's id, or `undefined`/`null` when the request has none (answered 400). */
export type PrincipalResult = string | undefined | null;

/**
 * Where a request's idempotency key comes from: the `Idempotency-Key` header (`'header'`, the default), a member
 * of the JSON body (`{ bodyField: 'requestId' }`, a dot path: `'meta.requestId'`), or a function of the request
 * answering the key, or `undefined` for none.
 */
export type IdempotencyKeySource<N = unknown> =
  | 'header'
  | { readonly bodyField: string }
  | ((request: IdempotentRequest<N>) => string | undefined);

/** A checked key source: reads the key of a request (`undefined`: none), or throws when the resolver fails. */
export type KeyReader<N> =
  | { readonly kind: 'header' }
  | { readonly kind: 'body'; readonly field: string; readonly path: readonly string[] }
  | { readonly kind: 'function'; readonly read: (request: IdempotentRequest<N>) => string | undefined };

/** Options of `idempotencyKeys`. */
export interface IdempotencyKeysConfig<
  DB,
  N = unknown,
  Tx = Transaction<DB>,
> extends IdempotencyKeyTableOptions {
  /**
   * The application's Kysely instance: the keys live in its database, next to the business tables. Give
   * either `db` or `seam`.
   */
  readonly db?: Kysely<DB>;
  /**
   * The application's data layer instead of Kysely (`pgSeam(pool)`, `knexSeam(knex)`, `prismaSeam(prisma)` … from
   * `@inboxkit/data`): handlers' `transaction` and `phase` then get that library's transaction object.
   *
   * @example
   * const keys = idempotencyKeys({ seam: knexSeam(knex), principal: (req) => req.headers['x-tenant'] as string });
   */
  readonly seam?: SqlSeam<Tx>;
  /**
   * Who is asking (the authenticated user, tenant or API key id). Keys are scoped by principal + method +
   * route, so one principal can never see another's stored response. Required: there is no safe default.
   * A keyed request whose principal is empty, blank or invisible, `undefined` or `null` is answered 400 and
   * not run (all such callers would otherwise share one scope); any other non-string is a `ConfigurationError`
   * (the adapters answer 500 naming it). Do not build it with `String(x)` of a value that may be missing: every
   * caller without one would become the principal `"undefined"`.
   */
  readonly principal: (request: IdempotentRequest<N>) => PrincipalResult | Promise<PrincipalResult>;
  /**
   * Where the key comes from. Default `'header'` (`Idempotency-Key`). `{ bodyField: 'requestId' }` takes it from
   * the JSON body (a dot path), for clients that put their request id in the payload; a present member that is
   * not 1–255 printable ASCII characters is answered 400, a missing one is "no key" (400 when `required`). A
   * function of the request answers the key or `undefined`; when it throws, the request is answered 500 and
   * nothing is claimed. Checked at start-up (`ConfigurationError`).
   *
   * @example
   * idempotencyKeys({ db, principal, key: { bodyField: 'requestId' } });
   */
  readonly key?: IdempotencyKeySource<N>;
  /**
   * What makes two requests under one key "the same request" (else 422). Default: method, route, query and
   * the whole body. `{ exclude: ['sentAt'] }` leaves out volatile body members (dot paths), `{ include: [...] }`
   * keeps only those; a function of the request answers what stands for the body, canonically fingerprinted
   * (method, route and query still count). Byte bodies are always taken whole by include/exclude. A function
   * that throws answers 500 and claims nothing. Checked at start-up (`ConfigurationError`). Changing it changes
   * the fingerprints of new keys: a retry of a key stored before may be answered 422 until the key expires.
   *
   * @example
   * idempotencyKeys({ db, principal, fingerprint: { exclude: ['sentAt', 'meta.traceId'] } });
   */
  readonly fingerprint?: FingerprintResolver<IdempotentRequest<N>>;
  /**
   * How long a request holds its key while in flight. After it, a retry may take over: safe only for handlers
   * that can be driven again (their writes go through the transaction, or their external calls are keyed).
   * Default is 60 s.
   */
  readonly leaseMs?: number;
  /** How long a key and its stored response are kept after completion. Default is 24 h (Stripe's). */
  readonly retentionMs?: number;
  /** Largest response (body + allow-listed headers) that can be stored. Default is 1 MiB. */
  readonly maxResponseBytes?: number;
  /** Whether requests without a key are refused with 400. Default is true; adapters can override per route. */
  readonly required?: boolean;
  /**
   * Which statuses are stored and replayed; the others release the key so a retry runs again. Default stores
   * every status below 500 (2xx, 3xx and the deterministic 4xx) and releases 5xx.
   */
  readonly storeStatus?: (status: number) => boolean;
  /** Response headers stored and replayed (lower-case). Default is content-type, content-language, location, etag. */
  readonly replayHeaders?: readonly string[];
  /** `Retry-After` seconds of the 409 sent while the first request is in flight. Default is 1. */
  readonly retryAfterSeconds?: number;
  /**
   * How long a handler may run. Then its `context.signal` aborts, the key is released and the client gets 503
   * with `Retry-After`; whatever the handler still tries to commit through the context is refused (the lease
   * is gone). Must be shorter than `leaseMs`. Default is half the lease (30 s with the default lease).
   */
  readonly handlerTimeoutMs?: number;
  /**
   * A cache of stored responses in front of Postgres (`redisFastPath({ client })` from `@inboxkit/core/redis`,
   * the same as a consumer's; the client is yours). Once a response is committed it is written there too, for
   * the key's remaining retention; a retry with the same key and the same request (fingerprint) is then answered
   * from the cache without a Postgres round trip. A miss, another request under the key (its 422 comes from
   * Postgres), a key in flight, an error or a timeout (`fastPath.timeoutMs`, default 20 ms) goes to Postgres as
   * without it: Postgres stays the authority. Default is none. See docs/fast-path.md.
   *
   * @example
   * idempotencyKeys({ db, principal, fastPath: redisFastPath({ client: redis }) });
   */
  readonly fastPath?: FastPath;
  /**
   * Largest response (body + stored headers, counted as `maxResponseBytes` counts them) written to the fast
   * path; larger ones stay in Postgres only, and their replays are read from there. Default is 16 KiB.
   */
  readonly fastPathMaxResponseBytes?: number;
  /**
   * Where the middleware's metrics go: `inboxkit.http.requests` (each request by `route` template, `method`,
   * `outcome` and `status_class`), `inboxkit.http.handler.duration` (ms, by `route`, `method`, `result`),
   * `inboxkit.http.lease_takeovers` (by `route`, `method`) and `inboxkit.fast_path` (each fast-path lookup's
   * `result`, with `scope: 'inboxkit-http'`). No metric carries the key, the principal or the raw path. Default is the global provider of `@opentelemetry/api` (a no-op until the
   * application registers an SDK). See docs/operations.md.
   *
   * @example
   * idempotencyKeys({ db, principal, fastPath, meterProvider: sdk.meterProvider });
   */
  readonly meterProvider?: MeterProvider;
  /**
   * Called once per request with what became of it (`IdempotencyOutcomeEvent`: outcome, route template, method,
   * status, status class, handler duration, and the key, for the application's own logs). A hook that throws
   * or rejects is logged (`logger`) and ignored: it never changes the response. Default is none.
   *
   * @example
   * idempotencyKeys({ db, principal, onOutcome: (e) => log.info(e, 'idempotency outcome') });
   */
  readonly onOutcome?: IdempotencyOutcomeHook;
  /**
   * Hears what the middleware does on its own: one warning each time the fast path leaves a failing cache
   * alone for a second (its lookups then go to Postgres and are counted as `bypassed` in `inboxkit.fast_path`).
   * Any object with pino-style `debug/info/warn/error(obj, msg)`; a logger that throws is ignored. Default is
   * none (silent), as for a consumer.
   *
   * @example
   * idempotencyKeys({ db, principal, fastPath, logger: pino() });
   */
  readonly logger?: Logger;
}

/** The validated configuration. */
export interface ResolvedIdempotencyKeysConfig<DB, N, Tx = Transaction<DB>> {
  /** The Kysely instance, when the config gave one (`seam` is then the Kysely seam over it). */
  readonly db: Kysely<DB> | undefined;
  readonly seam: SqlSeam<Tx>;
  readonly names: InboxTableNames;
  readonly principal: (request: IdempotentRequest<N>) => PrincipalResult | Promise<PrincipalResult>;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly maxResponseBytes: number;
  readonly required: boolean;
  readonly storeStatus: (status: number) => boolean;
  readonly replayHeaders: ReadonlySet<string>;
  readonly retryAfterSeconds: number;
  readonly handlerTimeoutMs: number;
  readonly fastPath: FastPath | undefined;
  readonly fastPathMaxResponseBytes: number;
  /** The given `meterProvider`; undefined means the global one, looked up when the middleware is created. */
  readonly meterProvider: MeterProvider | undefined;
  readonly onOutcome: IdempotencyOutcomeHook | undefined;
  readonly logger: Logger | undefined;
  /** Where the key comes from (`key`). */
  readonly key: KeyReader<N>;
  /** The request fingerprint's projection of the body (`fingerprint`); `undefined`: the whole body. */
  readonly fingerprint: CheckedFingerprintResolver<IdempotentRequest<N>> | undefined;
}

function checkKeySource<N>(source: IdempotencyKeySource<N> | undefined): KeyReader<N> {
  if (source === undefined || source === 'header') return { kind: 'header' };
  if (typeof source === 'function') return { kind: 'function', read: source };
  if (typeof source === 'object' && source !== null) {
    const field: unknown = (source as { bodyField?: unknown }).bodyField;
    if (typeof field === 'string' && field !== '' && !field.split('.').some((s) => s === '')) {
      return { kind: 'body', field, path: field.split('.') };
    }
    throw new ConfigurationError(
      `key.bodyField must be a non-empty dot path into the JSON body such as 'requestId', got ${JSON.stringify(field) ?? 'undefined'}`,
    );
  }
  throw new ConfigurationError(
    `key must be 'header', { bodyField: 'requestId' } or a function (request) => string | undefined, got ${JSON.stringify(source)}`,
  );
}

function positiveInteger(value: number, option: string): number {
  if (!Number.isSafeInteger(value) || value <= 0)
    throw new ConfigurationError(`${option} must be a positive integer, got ${String(value)}`);
  return value;
}

/** Validates the configuration and fills in the defaults. Throws a `ConfigurationError`. */
export function resolveIdempotencyKeysConfig<DB, N, Tx = Transaction<DB>>(
  config: IdempotencyKeysConfig<DB, N, Tx>,
): ResolvedIdempotencyKeysConfig<DB, N, Tx> {
  const hasDb = config.db !== undefined && config.db !== null;
  const hasSeam = config.seam !== undefined && config.seam !== null;
  if (hasDb === hasSeam)
    throw new ConfigurationError(
      'give either db (a Kysely instance) or seam (a data layer from @inboxkit/data, e.g. pgSeam(pool)), and only one',
    );
  if (typeof config.principal !== 'function') {
    throw new ConfigurationError(
      'principal must be a function of the request (the user, tenant or API key that owns the key)',
    );
  }
  const leaseMs = positiveInteger(config.leaseMs ?? 60_000, 'leaseMs');
  const retentionMs = positiveInteger(config.retentionMs ?? 24 * 60 * 60 * 1000, 'retentionMs');
  if (retentionMs <= leaseMs)
    throw new ConfigurationError(`retentionMs (${retentionMs}) must be longer than leaseMs (${leaseMs})`);
  const retryAfterSeconds = positiveInteger(config.retryAfterSeconds ?? 1, 'retryAfterSeconds');
  const handlerTimeoutMs = positiveInteger(
    config.handlerTimeoutMs ?? Math.max(1, Math.floor(leaseMs / 2)),
    'handlerTimeoutMs',
  );
  if (handlerTimeoutMs >= leaseMs) {
    throw new ConfigurationError(
      `handlerTimeoutMs (${handlerTimeoutMs}) must be shorter than leaseMs (${leaseMs}), or a retry could take over a running handler`,
    );
  }
  checkFastPath(config.fastPath);
  const key = checkKeySource(config.key);
  const fingerprint = checkFingerprintResolver(config.fingerprint, 'fingerprint');
  if (config.onOutcome !== undefined && typeof config.onOutcome !== 'function')
    throw new ConfigurationError('onOutcome must be a function of the outcome event');
  if (config.logger !== undefined && typeof config.logger?.warn !== 'function')
    throw new ConfigurationError(
      'logger must be an object with debug, info, warn and error methods (pino, console)',
    );
  return Object.freeze({
    db: config.db,
    names: resolveIdempotencyKeyTableNames(config),
    principal: config.principal,
    leaseMs,
    retentionMs,
    maxResponseBytes: positiveInteger(config.maxResponseBytes ?? 1024 * 1024, 'maxResponseBytes'),
    required: config.required ?? true,
    storeStatus: config.storeStatus ?? ((status: number) => status < 500),
    replayHeaders: new Set(
      (config.replayHeaders ?? ['content-type', 'content-language', 'location', 'etag']).map((h) =>
        h.toLowerCase(),
      ),
    ),
    retryAfterSeconds,
    handlerTimeoutMs,
    fastPath: config.fastPath,
    fastPathMaxResponseBytes: positiveInteger(
      config.fastPathMaxResponseBytes ?? 16 * 1024,
      'fastPathMaxResponseBytes',
    ),
    meterProvider: config.meterProvider,
    onOutcome: config.onOutcome,
    logger: config.logger,
    key,
    fingerprint,
    // Built last, once every option is valid.
    seam: hasSeam ? config.seam : (kyselySeam(config.db!) as unknown as SqlSeam<Tx>),
  });
}
