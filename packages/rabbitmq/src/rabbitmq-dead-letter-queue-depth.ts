// The depth of a RabbitMQ DLQ for the DLQ gauges (`observeDeadLetters` in @inboxkit/core/postgres): a passive
// queue.declare (`checkQueue`) on a channel of its own, which the broker answers from the queue's counters.

import type { BrokerDeadLetterQueueDepth } from '@inboxkit/core/postgres';
import type { AmqpChannel, AmqpConnection } from './amqp-types.js';

/** A broker DLQ's depth, as `observeDeadLetters` (`@inboxkit/core/postgres`) takes it in `brokerQueues`. */
export type RabbitmqDeadLetterQueueDepth = BrokerDeadLetterQueueDepth;

/** Options of `rabbitmqDeadLetterQueueDepth`. */
export interface RabbitmqDeadLetterQueueDepthOptions {
  /** A connection the application owns; one channel is opened on it at the first read and reused. */
  readonly connection: Pick<AmqpConnection, 'createChannel'>;
  /** The DLQ's name (the gauge's `dlq` attribute). */
  readonly queue: string;
}

/**
 * The DLQ's ready messages (`messageCount`; a message a `dlq list` holds unacknowledged is not counted while
 * it is held). A read that fails drops the channel; the next opens another.
 *
 * @example
 * observeDeadLetters(store, { brokerQueues: [rabbitmqDeadLetterQueueDepth({ connection, queue: 'orders.dlq' })] });
 */
export function rabbitmqDeadLetterQueueDepth(options: RabbitmqDeadLetterQueueDepthOptions): RabbitmqDeadLetterQueueDepth {
  let channel: Promise<AmqpChannel> | undefined;
  return {
    name: options.queue,
    async depth() {
      channel ??= options.connection.createChannel().then((opened) => {
        // The broker closes the channel on a failed passive declare: the read rejects, the event is expected.
        opened.on('error', () => undefined);
        return opened;
      });
      try {
        return (await (await channel).checkQueue(options.queue)).messageCount;
      } catch (error) {
        // A failed passive declare closes the channel (404): open a new one next time.
        channel = undefined;
        throw error;
      }
    },
  };
}
