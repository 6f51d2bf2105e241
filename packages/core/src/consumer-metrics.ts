// The consumer's metrics through @opentelemetry/api: no-op until the application registers an SDK (or passes
// a MeterProvider). Names follow OpenTelemetry conventions; every series carries the `consumer` attribute.

import { metrics, type Counter, type Histogram, type MeterProvider } from '@opentelemetry/api';

/** Instrument names, documented for dashboards. */
export const METRIC_NAMES = {
  /** Counter of deliveries by `outcome` (processed, duplicate, retry, dead-letter). */
  messages: 'inboxkit.messages',
  /**
   * Counter of suppressed duplicates by `reason` (completed, replay-of-completed), with `source: 'fast-path'` on
   * those the fast path answered: healthy and rising.
   */
  duplicates: 'inboxkit.duplicates_suppressed',
  /** Histogram of handler run time in milliseconds, by `result` (ok, error). */
  handlerDuration: 'inboxkit.handler.duration',
  /** Counter of retries by `reason`. */
  retries: 'inboxkit.retries',
  /** Counter of dead letters by `reason`. */
  deadLetters: 'inboxkit.dead_letters',
  /** Counter of leases taken over after they expired (leased mode). */
  leaseTakeovers: 'inboxkit.lease_takeovers',
  /** Counter of messages older than the dedupe window with no inbox row, by `policy`. */
  lateMessages: 'inboxkit.late_messages',
  /**
   * Counter of fast-path lookups by `result`: hit (answered duplicate without Postgres), miss, mismatch,
   * error, timeout, bypassed (the cache failed repeatedly or is stalled, and is left alone for a moment).
   */
  fastPath: 'inboxkit.fast_path',
  /** Counter of deliveries whose payload differs from the one first recorded under their id. */
  payloadMismatches: 'inboxkit.payload_mismatches',
} as const;

/** The instruments of one consumer. */
export class ConsumerMetrics {
  readonly #consumer: string;
  readonly #messages: Counter;
  readonly #duplicates: Counter;
  readonly #handlerDuration: Histogram;
  readonly #retries: Counter;
  readonly #deadLetters: Counter;
  readonly #leaseTakeovers: Counter;
  readonly #late: Counter;
  readonly #mismatches: Counter;
  readonly #fastPath: Counter;

  constructor(consumer: string, provider: MeterProvider | undefined) {
    this.#consumer = consumer;
    const meter = (provider ?? metrics.getMeterProvider()).getMeter('@inboxkit/core');
    this.#messages = meter.createCounter(METRIC_NAMES.messages, { description: 'Deliveries by outcome' });
    this.#duplicates = meter.createCounter(METRIC_NAMES.duplicates, { description: 'Duplicates suppressed' });
    this.#handlerDuration = meter.createHistogram(METRIC_NAMES.handlerDuration, {
      description: 'Handler run time',
      unit: 'ms',
    });
    this.#retries = meter.createCounter(METRIC_NAMES.retries, { description: 'Deliveries to retry, by reason' });
    this.#deadLetters = meter.createCounter(METRIC_NAMES.deadLetters, { description: 'Dead letters by reason' });
    this.#leaseTakeovers = meter.createCounter(METRIC_NAMES.leaseTakeovers, { description: 'Expired leases taken over' });
    this.#late = meter.createCounter(METRIC_NAMES.lateMessages, { description: 'Messages older than the dedupe window' });
    this.#fastPath = meter.createCounter(METRIC_NAMES.fastPath, { description: 'Fast-path lookups by result' });
    this.#mismatches = meter.createCounter(METRIC_NAMES.payloadMismatches, {
      description: 'Same id, different payload',
    });
  }

  outcome(status: string): void {
    this.#messages.add(1, { consumer: this.#consumer, outcome: status });
  }
  duplicate(reason: string, source?: 'fast-path'): void {
    this.#duplicates.add(1, source === undefined ? { consumer: this.#consumer, reason } : { consumer: this.#consumer, reason, source });
  }
  fastPath(result: string): void {
    this.#fastPath.add(1, { consumer: this.#consumer, result });
  }
  handlerDuration(ms: number, ok: boolean): void {
    this.#handlerDuration.record(ms, { consumer: this.#consumer, result: ok ? 'ok' : 'error' });
  }
  retry(reason: string): void {
    this.#retries.add(1, { consumer: this.#consumer, reason });
  }
  deadLetter(reason: string): void {
    this.#deadLetters.add(1, { consumer: this.#consumer, reason });
  }
  leaseTakeover(): void {
    this.#leaseTakeovers.add(1, { consumer: this.#consumer });
  }
  late(policy: string): void {
    this.#late.add(1, { consumer: this.#consumer, policy });
  }
  payloadMismatch(): void {
    this.#mismatches.add(1, { consumer: this.#consumer });
  }
}
