// A Kafka client that hands out real producers and records, per producer it created, whether it was
// disconnected: the publisher's and the dead-letter producer's "retire a failed producer" tests count with it.

import type { KafkaClientLike } from '../../src/kafka-client-types.js';

/** One producer the counting client created. */
export interface CreatedProducer {
  disconnected: boolean;
}

/** `kafka`, with every producer it creates listed in `created` (in order). */
export function countingKafka(kafka: KafkaClientLike): {
  client: KafkaClientLike;
  created: CreatedProducer[];
} {
  const created: CreatedProducer[] = [];
  const client: KafkaClientLike = {
    consumer: (config) => kafka.consumer(config),
    admin: () => kafka.admin(),
    producer: (config) => {
      const real = kafka.producer(config);
      const entry = { disconnected: false };
      created.push(entry);
      return {
        connect: () => real.connect(),
        sendBatch: (batch) => real.sendBatch(batch),
        disconnect: async () => {
          entry.disconnected = true;
          await real.disconnect();
        },
      };
    },
  };
  return { client, created };
}
