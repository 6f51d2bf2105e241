// Read access to a RabbitMQ DLQ for `inboxkit dlq list|replay`. RabbitMQ has no peek: browsing gets
// messages without acking them and returns them all when the channel closes, which can reorder the queue
// (and, on a quorum DLQ, raises each message's delivery count).

import { ConfigurationError, deadLetterEntry, HEADERS, takenDeadLetter } from '@inboxkit/core';
import type { DeadLetterEntry, DeadLetterQueueReader, TakenDeadLetter } from '@inboxkit/core';
import type { AmqpChannel, AmqpConnection, AmqpMessage } from './amqp-types.js';
import { topologyNames } from './declare-topology.js';
import { stringHeaders } from './inbound-message.js';

/** Options of `rabbitmqDeadLetterQueue`. */
export interface RabbitmqDeadLetterQueueOptions {
  /** A connection the application owns; the reader opens (and closes) its own channels on it. */
  readonly connection: AmqpConnection;
  /** The work queue whose DLQ to read (`<queue>.dlq`). */
  readonly queue: string;
  /** The DLQ's name, when it is not `<queue>.dlq`. Default is `<queue>.dlq`. */
  readonly deadLetterQueue?: string;
  /** Consumer name reported for dead letters the broker made itself (delivery limit). Default is `unknown`. */
  readonly consumer?: string;
}

const BROKER_REASONS: Readonly<Record<string, string>> = {
  delivery_limit: 'delivery-limit',
  rejected: 'rejected',
  expired: 'expired',
  maxlen: 'max-length',
};

/** The most recent broker dead-lettering: `x-death` lists them newest first (`x-first-death-*` is the oldest). */
function lastDeath(message: AmqpMessage): { reason?: string; queue?: string; exchange?: string } | undefined {
  const deaths = message.properties.headers?.['x-death'];
  const last: unknown = Array.isArray(deaths) ? deaths[0] : undefined;
  if (typeof last !== 'object' || last === null) return undefined;
  const { reason, queue, exchange } = last as Record<string, unknown>;
  return {
    ...(typeof reason === 'string' ? { reason } : {}),
    ...(typeof queue === 'string' ? { queue } : {}),
    ...(typeof exchange === 'string' ? { exchange } : {}),
  };
}

/**
 * The entry's headers. A dead letter the broker made itself (the work queue's delivery limit, after a process
 * crashed on the message again and again) has no inboxkit headers: its reason, queue and consumer are filled
 * in from `x-death` so it lists and replays like any other.
 */
function entryHeaders(message: AmqpMessage, consumer: string): Record<string, string> {
  const headers = stringHeaders(message.properties.headers);
  const messageId = message.properties.messageId;
  if (headers[HEADERS.messageId] === undefined && typeof messageId === 'string' && messageId !== '') {
    headers[HEADERS.messageId] = messageId;
  }
  const death = lastDeath(message);
  if (headers[HEADERS.reason] === undefined && death?.reason !== undefined) {
    headers[HEADERS.reason] = BROKER_REASONS[death.reason] ?? death.reason;
    headers[HEADERS.consumer] ??= consumer;
    headers[HEADERS.sourceTransport] ??= 'rabbitmq';
    if (death.queue !== undefined) headers[HEADERS.sourceDestination] ??= death.queue;
    if (death.exchange !== undefined) headers[HEADERS.sourceExchange] ??= death.exchange;
    const count = headers['x-delivery-count'];
    if (count !== undefined) headers[HEADERS.attempts] ??= count;
  }
  return headers;
}

class RabbitmqDeadLetterQueue implements DeadLetterQueueReader {
  readonly nonDestructiveBrowse = false;
  readonly #connection: AmqpConnection;
  readonly #dlq: string;
  readonly #consumer: string;
  readonly #channels = new Set<AmqpChannel>();

  constructor(options: RabbitmqDeadLetterQueueOptions) {
    this.#connection = options.connection;
    this.#dlq = options.deadLetterQueue ?? topologyNames(options.queue).deadLetterQueue;
    this.#consumer = options.consumer ?? 'unknown';
  }

  #entry(message: AmqpMessage, index: number): DeadLetterEntry {
    return deadLetterEntry(entryHeaders(message, this.#consumer), message.content, `${this.#dlq}#${index}`);
  }

  async #open(): Promise<AmqpChannel> {
    const channel = await this.#connection.createChannel();
    channel.on('error', () => undefined); // A failed get() rejects; the event must not crash the process.
    this.#channels.add(channel);
    try {
      await channel.checkQueue(this.#dlq);
    } catch (err) {
      this.#channels.delete(channel);
      throw new ConfigurationError(
        `DLQ "${this.#dlq}" does not exist or is not accessible: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
    return channel;
  }

  async #close(channel: AmqpChannel): Promise<void> {
    this.#channels.delete(channel);
    try {
      await channel.close(); // Returns every unacked message to the DLQ.
    } catch {
      // Already closed.
    }
  }

  /** Gets up to `limit` messages without acking; they all go back when the iteration ends. */
  async *browse(options: { readonly limit: number }): AsyncIterable<DeadLetterEntry> {
    const channel = await this.#open();
    try {
      for (let i = 0; i < options.limit; i++) {
        const message = await channel.get(this.#dlq, { noAck: false });
        if (message === false) return;
        yield this.#entry(message, i);
      }
    } finally {
      await this.#close(channel);
    }
  }

  /**
   * Takes messages one at a time. `remove()` acks one (do it once its copy was published back); `release()`
   * leaves it in the DLQ: it stays unacked, so the next take moves on, and goes back when the iteration ends.
   */
  async *take(options: { readonly limit: number }): AsyncIterable<TakenDeadLetter> {
    const channel = await this.#open();
    let done = false;
    try {
      for (let i = 0; i < options.limit; i++) {
        const message = await channel.get(this.#dlq, { noAck: false });
        if (message === false) return;
        yield takenDeadLetter(this.#entry(message, i), {
          remove: () => {
            if (done) {
              throw new ConfigurationError(
                'remove() after its take() iteration ended: the message went back to the DLQ',
              );
            }
            channel.ack(message);
          },
        });
      }
    } finally {
      done = true;
      await this.#close(channel);
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.#channels].map((c) => this.#close(c)));
  }
}

/**
 * A reader of `<queue>.dlq` for the CLI's `dlq list` and `dlq replay`. Browsing is not read-only
 * (`nonDestructiveBrowse: false`): messages are fetched unacked and returned when the iteration ends, which
 * may reorder the DLQ.
 *
 * @example
 * const dlq = rabbitmqDeadLetterQueue({ connection, queue: 'orders' });
 * for await (const entry of dlq.browse({ limit: 20 })) console.log(entry.id, entry.headers['x-inboxkit-reason']);
 * await dlq.close();
 */
export function rabbitmqDeadLetterQueue(options: RabbitmqDeadLetterQueueOptions): DeadLetterQueueReader {
  if (!options?.connection || typeof options.connection.createChannel !== 'function') {
    throw new ConfigurationError('rabbitmqDeadLetterQueue: `connection` must be an amqplib connection');
  }
  if (typeof options.queue !== 'string' || options.queue === '') {
    throw new ConfigurationError('rabbitmqDeadLetterQueue: `queue` must be the work queue whose DLQ to read');
  }
  return new RabbitmqDeadLetterQueue(options);
}
