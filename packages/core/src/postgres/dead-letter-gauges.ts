// The gauges every team alerts on first: how many dead letters wait, and how long the oldest has waited — per
// consumer from the inbox (rows still `dead_lettered`: discarded and archived ones have left), and per broker
// DLQ where the broker says its depth cheaply (SQS, RabbitMQ: see their `*DeadLetterQueueDepth`). Read when the
// application's MeterProvider collects, not on a timer of their own, and at most once per `cacheMs`: several
// replicas each scraped every few seconds would otherwise query Postgres (and the brokers) on every scrape, for
// numbers that alerts read over minutes. Between readings the oldest age keeps growing with the local clock.

import { metrics, type BatchObservableResult, type MeterProvider, type ObservableGauge } from '@opentelemetry/api';
import type { Logger } from '../consumer-types.js';
import { ConfigurationError } from '../errors.js';
import { silentLogger } from '../silent-logger.js';
import type { DeadLetterAge } from './dead-letter-lifecycle.js';

/** Instrument names of `observeDeadLetters`, documented for dashboards (the consumer's `inboxkit.` scheme). */
export const DEAD_LETTER_METRIC_NAMES = Object.freeze({
  /** Gauge of dead letters waiting: by `consumer` with `source: 'inbox'`, by `dlq` with `source: 'broker'`. */
  depth: 'inboxkit.dlq.depth',
  /** Gauge of the oldest inbox dead letter's age in seconds, by `consumer` (`source: 'inbox'`). */
  oldestAge: 'inboxkit.dlq.oldest_age',
});

/** What the gauges read the inbox through (`PostgresInboxStore` has both). */
export interface DeadLetterGaugeSource {
  deadLetterAges(filter?: { readonly consumer?: string }): Promise<DeadLetterAge[]>;
  /** The database's clock, which dead-letter times are measured on. */
  now(): Promise<Date>;
}

/** A broker DLQ whose depth the broker reports cheaply. */
export interface BrokerDeadLetterQueueDepth {
  /** The DLQ's name, the `dlq` attribute. */
  readonly name: string;
  /** Messages in it now (approximate where the broker is). */
  depth(): Promise<number>;
}

/** Options of `observeDeadLetters`. */
export interface DeadLetterGaugesOptions {
  /** Default is the global MeterProvider (a no-op until the application registers an SDK). */
  readonly meterProvider?: MeterProvider;
  /** Only this consumer's dead letters. Default is every consumer of the inbox. */
  readonly consumer?: string;
  /** Broker DLQs to report the depth of. Default is none. */
  readonly brokerQueues?: readonly BrokerDeadLetterQueueDepth[];
  /** Where a failed read is logged (the gauges then skip that collection). Default is a silent logger. */
  readonly logger?: Logger;
  /**
   * How long one reading of the inbox (and of each broker DLQ's depth) serves the collections that follow it,
   * in ms: within it a collection reports the last reading (the oldest age advanced by the time since) and
   * queries nothing, and collections at once share one reading. A failed reading is not kept. 0 reads on
   * every collection. Default is 30_000 (30 s).
   *
   * @example
   * observeDeadLetters(store, { cacheMs: 60_000 }); // one query a minute per replica, however often it is scraped
   */
  readonly cacheMs?: number;
}

/** Default of `DeadLetterGaugesOptions.cacheMs`. */
export const DEFAULT_DEAD_LETTER_GAUGES_CACHE_MS: number = 30_000;

/** Registered gauges; `stop()` unregisters them. */
export interface DeadLetterGauges {
  stop(): void;
}

/**
 * Registers the DLQ depth and oldest-dead-letter-age gauges (`DEAD_LETTER_METRIC_NAMES`). A consumer once
 * seen reports 0 when its last dead letter is gone, so an alert clears.
 *
 * @example
 * const gauges = observeDeadLetters(store, { brokerQueues: [sqsDeadLetterQueueDepth(sqs, dlqUrl)] });
 * // alert: inboxkit.dlq.depth{source="inbox"} > 0 for 15 min, or inboxkit.dlq.oldest_age > 86400
 * process.on('SIGTERM', () => gauges.stop());
 */
export function observeDeadLetters(source: DeadLetterGaugeSource, options: DeadLetterGaugesOptions = {}): DeadLetterGauges {
  const cacheMs = options.cacheMs ?? DEFAULT_DEAD_LETTER_GAUGES_CACHE_MS;
  if (typeof cacheMs !== 'number' || !Number.isFinite(cacheMs) || cacheMs < 0) {
    throw new ConfigurationError(`cacheMs must be a non-negative number of milliseconds, got ${JSON.stringify(options.cacheMs)}`);
  }
  const meter = (options.meterProvider ?? metrics).getMeter('@inboxkit/core');
  const depth: ObservableGauge = meter.createObservableGauge(DEAD_LETTER_METRIC_NAMES.depth, { description: 'Dead letters waiting' });
  const oldestAge: ObservableGauge = meter.createObservableGauge(DEAD_LETTER_METRIC_NAMES.oldestAge, {
    description: 'Age of the oldest dead letter waiting',
    unit: 's',
  });
  const logger = options.logger ?? silentLogger;
  const brokers = options.brokerQueues ?? [];
  const seen = new Set<string>();
  const filter = options.consumer === undefined ? {} : { consumer: options.consumer };
  const inbox = cachedReading(cacheMs, async () => {
    const [ages, now] = await Promise.all([source.deadLetterAges(filter), source.now()]);
    return { ages, now };
  });
  const brokerDepths = brokers.map((b) => cachedReading(cacheMs, () => b.depth()));
  const callback = async (observer: BatchObservableResult): Promise<void> => {
    try {
      const { value: reading, ageMs } = await inbox();
      const { ages } = reading;
      // The database's clock at the reading, moved on by the local time since.
      const now = new Date(reading.now.getTime() + ageMs);
      const present = new Set<string>();
      for (const a of ages) {
        present.add(a.consumer);
        seen.add(a.consumer);
        observer.observe(depth, a.count, { consumer: a.consumer, source: 'inbox' });
        if (a.oldestAt !== undefined) {
          observer.observe(oldestAge, Math.max(0, (now.getTime() - a.oldestAt.getTime()) / 1000), { consumer: a.consumer, source: 'inbox' });
        }
      }
      for (const consumer of seen) {
        if (present.has(consumer)) continue;
        observer.observe(depth, 0, { consumer, source: 'inbox' });
        observer.observe(oldestAge, 0, { consumer, source: 'inbox' });
      }
    } catch (error) {
      logger.warn({ err: error }, 'inboxkit: reading the inbox dead letters for the DLQ gauges failed');
    }
    await Promise.all(
      brokers.map(async (b, i) => {
        try {
          observer.observe(depth, (await brokerDepths[i]!()).value, { dlq: b.name, source: 'broker' });
        } catch (error) {
          logger.warn({ err: error, dlq: b.name }, 'inboxkit: reading a broker DLQ depth for the DLQ gauges failed');
        }
      }),
    );
  };
  meter.addBatchObservableCallback(callback, [depth, oldestAge]);
  return { stop: () => meter.removeBatchObservableCallback(callback, [depth, oldestAge]) };
}

/**
 * `read`, at most once per `ttlMs`: a call within it gets the last value and how old it is (ms); calls while a
 * reading runs share it; a failed reading is not kept.
 */
function cachedReading<T>(ttlMs: number, read: () => Promise<T>): () => Promise<{ readonly value: T; readonly ageMs: number }> {
  let last: { readonly value: T; readonly at: number } | undefined;
  let running: Promise<{ readonly value: T; readonly at: number }> | undefined;
  return async () => {
    const now = performance.now();
    if (last !== undefined && now - last.at < ttlMs) return { value: last.value, ageMs: now - last.at };
    running ??= read()
      .then((value) => (last = { value, at: performance.now() }))
      .finally(() => {
        running = undefined;
      });
    const fresh = await running;
    return { value: fresh.value, ageMs: Math.max(0, performance.now() - fresh.at) };
  };
}
