// The gauges every team alerts on first: how many dead letters wait, and how long the oldest has waited — per
// consumer from the inbox (rows still `dead_lettered`: discarded and archived ones have left), and per broker
// DLQ where the broker says its depth cheaply (SQS, RabbitMQ: see their `*DeadLetterQueueDepth`). Read when the
// application's MeterProvider collects, not on a timer of their own.

import { metrics, type BatchObservableResult, type MeterProvider, type ObservableGauge } from '@opentelemetry/api';
import type { Logger } from '../consumer-types.js';
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
}

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
  const callback = async (observer: BatchObservableResult): Promise<void> => {
    try {
      const [ages, now] = await Promise.all([source.deadLetterAges(filter), source.now()]);
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
      brokers.map(async (b) => {
        try {
          observer.observe(depth, await b.depth(), { dlq: b.name, source: 'broker' });
        } catch (error) {
          logger.warn({ err: error, dlq: b.name }, 'inboxkit: reading a broker DLQ depth for the DLQ gauges failed');
        }
      }),
    );
  };
  meter.addBatchObservableCallback(callback, [depth, oldestAge]);
  return { stop: () => meter.removeBatchObservableCallback(callback, [depth, oldestAge]) };
}
