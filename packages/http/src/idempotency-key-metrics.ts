// The middleware's metrics through @opentelemetry/api: no-op until the application registers an SDK (or passes
// a MeterProvider). The fast-path counter is core's (`inboxkit.fast_path`), labelled with the fast-path scope
// the middleware's entries live under instead of a consumer's name. The request instruments
// (`inboxkit.http.*`) carry low-cardinality attributes only: the route template, the method, the outcome and
// the status class; never the key, the principal or the raw path. The `onOutcome` hook gets the same fields
// plus the key, for the application's own logs.

import { METRIC_NAMES, type FastPathResult, type Logger } from '@inboxkit/core';
import { metrics, type Counter, type Histogram, type MeterProvider } from '@opentelemetry/api';
import { HTTP_FAST_PATH_SCOPE } from './cached-response.js';
import { safeLog } from './safe-log.js';

/** The middleware's instrument names, documented for dashboards and alerts (docs/operations.md). */
export const HTTP_METRIC_NAMES = {
  /** Counter of keyed and unkeyed requests by `route`, `method`, `outcome` and `status_class`. */
  requests: 'inboxkit.http.requests',
  /** Histogram of handler run time in milliseconds, by `route`, `method` and `result` (ok, error, timeout). */
  handlerDuration: 'inboxkit.http.handler.duration',
  /** Counter of keys whose lease ran out while processing and that a retry took over, by `route`, `method`. */
  leaseTakeovers: 'inboxkit.http.lease_takeovers',
} as const;

/**
 * What became of one request:
 * - `completed`: the handler ran and its response was stored (replayed from now on);
 * - `replay`: a stored response was sent again (`Idempotent-Replayed: true`), from Postgres or the fast path;
 * - `conflict`: 409, the first request with this key is still in flight;
 * - `mismatch`: 422, the key was used with another method, route, query or body;
 * - `missing`, `invalid`, `no-principal`: 400, nothing was claimed;
 * - `released`: the handler ran but its response was not stored (5xx by default) or it threw, so the key was
 *   released and a retry runs it again;
 * - `timeout`: the handler ran longer than `handlerTimeoutMs`: 503, the key was released;
 * - `unkeyed`: no key and none required: the handler ran without idempotency.
 */
export type IdempotencyOutcome =
  | 'completed'
  | 'replay'
  | 'conflict'
  | 'mismatch'
  | 'missing'
  | 'invalid'
  | 'no-principal'
  /** The application's key or fingerprint resolver threw (500, nothing claimed). */
  | 'resolver-failed'
  | 'released'
  | 'timeout'
  | 'unkeyed';

/** One request's outcome, as given to the `onOutcome` hook. */
export interface IdempotencyOutcomeEvent {
  readonly outcome: IdempotencyOutcome;
  /** The route template (`IdempotentRequest.routeTemplate`, e.g. `/payments/:id`), never the raw path. */
  readonly route: string;
  /** The method, upper-case. */
  readonly method: string;
  /** The status sent; 500 when the handler (or storing its response) threw and the adapter's error path answers. */
  readonly status: number;
  /** `2xx`, `3xx`, `4xx` or `5xx`. */
  readonly statusClass: string;
  /** The request's Idempotency-Key (for the application's own logs; not in any metric), undefined without one. */
  readonly key: string | undefined;
  /** The handler's run time in ms, when it ran. */
  readonly durationMs?: number;
}

/** The `onOutcome` option: called once per request; what it throws (or rejects with) is logged and ignored. */
export type IdempotencyOutcomeHook = (event: IdempotencyOutcomeEvent) => void | Promise<void>;

/** The route attribute of a request without a template (node:http without a `routeTemplate` option). */
export const UNMATCHED_ROUTE = 'unmatched';

function statusClass(status: number): string {
  return Number.isInteger(status) && status >= 100 && status <= 599
    ? `${Math.floor(status / 100)}xx`
    : 'other';
}

/** The instruments of one `idempotencyKeys` middleware. */
export class IdempotencyKeyMetrics {
  readonly #fastPath: Counter;
  readonly #requests: Counter;
  readonly #handlerDuration: Histogram;
  readonly #leaseTakeovers: Counter;
  readonly #attributes: Record<FastPathResult, { readonly scope: string; readonly result: FastPathResult }>;
  readonly #onOutcome: IdempotencyOutcomeHook | undefined;
  readonly #logger: Logger | undefined;

  constructor(
    provider: MeterProvider | undefined,
    options: {
      readonly onOutcome?: IdempotencyOutcomeHook | undefined;
      readonly logger?: Logger | undefined;
    } = {},
  ) {
    const meter = (provider ?? metrics.getMeterProvider()).getMeter('@inboxkit/http');
    this.#fastPath = meter.createCounter(METRIC_NAMES.fastPath, {
      description: 'Fast-path lookups by result',
    });
    this.#requests = meter.createCounter(HTTP_METRIC_NAMES.requests, {
      description: 'Requests by route, method, outcome and status class',
    });
    this.#handlerDuration = meter.createHistogram(HTTP_METRIC_NAMES.handlerDuration, {
      description: 'Handler run time',
      unit: 'ms',
    });
    this.#leaseTakeovers = meter.createCounter(HTTP_METRIC_NAMES.leaseTakeovers, {
      description: 'Expired leases taken over by a retry',
    });
    this.#onOutcome = options.onOutcome;
    this.#logger = options.logger;
    // One frozen attribute set per result: a lookup allocates nothing to be counted.
    const attributes = (result: FastPathResult) => Object.freeze({ scope: HTTP_FAST_PATH_SCOPE, result });
    this.#attributes = {
      hit: attributes('hit'),
      miss: attributes('miss'),
      mismatch: attributes('mismatch'),
      error: attributes('error'),
      timeout: attributes('timeout'),
      bypassed: attributes('bypassed'),
      skipped: attributes('skipped'),
    };
  }

  /** Counts one fast-path lookup's result (what `FastPathGuard.check` said). */
  fastPath(result: FastPathResult): void {
    this.#fastPath.add(1, this.#attributes[result]);
  }

  /** Counts a lease taken over by a retry (the first request outlived its lease). */
  leaseTakeover(route: string, method: string): void {
    this.#leaseTakeovers.add(1, { route, method });
  }

  /** Records a handler's run time. */
  handlerDuration(route: string, method: string, ms: number, result: 'ok' | 'error' | 'timeout'): void {
    this.#handlerDuration.record(ms, { route, method, result });
  }

  /** Counts one request's outcome and tells the `onOutcome` hook, which cannot break the request. */
  outcome(event: Omit<IdempotencyOutcomeEvent, 'statusClass'>): void {
    const full: IdempotencyOutcomeEvent = { ...event, statusClass: statusClass(event.status) };
    this.#requests.add(1, {
      route: full.route,
      method: full.method,
      outcome: full.outcome,
      status_class: full.statusClass,
    });
    if (this.#onOutcome === undefined) return;
    const failed = (error: unknown) =>
      safeLog(
        this.#logger,
        'error',
        { err: error, outcome: full.outcome, route: full.route },
        'idempotency keys: the onOutcome hook threw; ignored',
      );
    try {
      const result: unknown = this.#onOutcome(full);
      if (result !== null && typeof (result as PromiseLike<unknown> | undefined)?.then === 'function')
        (result as PromiseLike<unknown>).then(undefined, failed);
    } catch (error) {
      failed(error);
    }
  }
}

const registry = new WeakMap<object, IdempotencyKeyMetrics>();

/** Ties a middleware's instruments to it, for `runIdempotent`. */
export function registerMetrics(keys: object, instruments: IdempotencyKeyMetrics): void {
  registry.set(keys, instruments);
}

/** The instruments of a middleware made by `idempotencyKeys` (undefined for another implementation). */
export function metricsOf(keys: object): IdempotencyKeyMetrics | undefined {
  return registry.get(keys);
}
