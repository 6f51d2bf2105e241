// Kafka's side of the delivery kit: its declared features and the four settlement verbs. Kafka settles a
// partition, not a record: a record is "acked" when its offset may be committed (with everything before it),
// and "redelivered" or "left" when the partition must be fetched again from it. So the verbs only write the
// record's verdict, and the batch processor commits up to the unbroken run of finished records and seeks the
// partition back to the first that is not; the dead-letter verb produces and confirms, and `settle()` decides
// the rest (the outcome → verb mapping, the smaller forms when the DLQ topic refuses a record as too large).

import type { BrokerSettlement, InboundMessage, TransportFeatures } from '@inboxkit/core';
import type { DeadLetterProducer } from './dead-letter-producer.js';
import type { KafkaMessageLike } from './kafka-client-types.js';

/**
 * What Kafka guarantees: order per partition key, no native delay (a retry pauses the partition and seeks
 * back), no delivery count, and a seek back spends nothing a broker counts (so a store outage is settled as a
 * retry: the partition waits and fetches the record again).
 */
export const KAFKA_FEATURES: TransportFeatures = Object.freeze({
  ordering: 'key',
  nativeDelay: false,
  deliveryCount: false,
  redeliverSpendsCount: false,
});

/** One fetched record being settled. */
export interface KafkaDelivery {
  readonly topic: string;
  readonly partition: number;
  readonly record: KafkaMessageLike;
  readonly message: InboundMessage;
  /**
   * Written by the verbs: `undefined` once the record is done (its offset may be committed), otherwise the
   * pause before its partition is fetched again from this record.
   */
  again?: number;
}

/**
 * The settlement verbs over `deadLetters`: `ack` marks the record done; `redeliver` asks for the partition to
 * be fetched again from it after the retry's delay; `leave` after `pauseOnFailureMs`; `deadLetter` produces
 * the form with `acks: -1`.
 */
export function kafkaSettlement(
  deadLetters: DeadLetterProducer,
  pauseOnFailureMs: number,
): BrokerSettlement<KafkaDelivery> {
  return {
    ack: (d) => {
      d.again = undefined;
    },
    redeliver: (d, delayMs) => {
      d.again = delayMs;
      return Promise.resolve({ status: 'sent' });
    },
    deadLetter: (d, form, outcome) => deadLetters.send(d.topic, d, form, outcome),
    leave: (d) => {
      d.again = pauseOnFailureMs;
    },
  };
}
