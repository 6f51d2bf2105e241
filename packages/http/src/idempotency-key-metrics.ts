// The middleware's metrics through @opentelemetry/api: no-op until the application registers an SDK (or passes
// a MeterProvider). The fast-path counter is core's (`inboxkit.fast_path`), labelled with the fast-path scope
// the middleware's entries live under instead of a consumer's name.

import { METRIC_NAMES, type FastPathResult } from '@inboxkit/core';
import { metrics, type Counter, type MeterProvider } from '@opentelemetry/api';
import { HTTP_FAST_PATH_SCOPE } from './cached-response.js';

/** The instruments of one `idempotencyKeys` middleware. */
export class IdempotencyKeyMetrics {
  readonly #fastPath: Counter;
  readonly #attributes: Record<FastPathResult, { readonly scope: string; readonly result: FastPathResult }>;

  constructor(provider: MeterProvider | undefined) {
    const meter = (provider ?? metrics.getMeterProvider()).getMeter('@inboxkit/http');
    this.#fastPath = meter.createCounter(METRIC_NAMES.fastPath, {
      description: 'Fast-path lookups by result',
    });
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
}
