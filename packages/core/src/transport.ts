// The two small ports every transport implements, so "consume and settle" and "publish and be sure" are
// written once per broker. Core depends on these types only; it never imports a broker client.

/** A running consumer of one transport. */
export interface TransportConsumer {
  /** Starts consuming. Resolves once subscribed; rejects with a ConfigurationError on bad configuration. */
  start(): Promise<void>;
  /**
   * Stops fetching, waits for in-flight messages up to the close timeout, settles (acks / commits / deletes)
   * what finished, and leaves the rest to be redelivered. Safe to call twice.
   */
  stop(): Promise<void>;
}

/** One message to publish with the broker's confirmation. */
export interface OutgoingMessage {
  /** Kafka topic, RabbitMQ exchange (routing key in `routingKey`), or SQS queue URL. */
  readonly destination: string;
  /** The message id, written as the `message-id` header (and the broker's native id property where one exists). */
  readonly id: string;
  readonly body: Uint8Array | string;
  readonly headers?: Readonly<Record<string, string>>;
  /** Kafka partition key, or SQS FIFO MessageGroupId. */
  readonly key?: string;
  /** RabbitMQ routing key (defaults to the empty string). */
  readonly routingKey?: string;
  /** Ask the broker to hold the message this long before delivering it, where the transport supports it. */
  readonly delayMs?: number;
  /**
   * The message's own time, which the consumer reads back as `InboundMessage.timestamp` (and the partitioned
   * inbox keys rows by its UTC day): the Kafka record timestamp, the AMQP `timestamp` property (whole seconds),
   * and on SQS, whose SentTimestamp the broker assigns, the `x-inboxkit-timestamp` attribute (epoch ms) that
   * the SQS consumer prefers. Fix it once per message and keep it on every resend. Default is none: the broker
   * stamps each send (Kafka, SQS) or there is none (RabbitMQ).
   *
   * @example
   * await publisher.publish([{ destination: 'payments', id: 'pay-42', body, timestamp: enqueuedAt }]);
   */
  readonly timestamp?: Date;
}

/**
 * Publishes and resolves only once the broker has confirmed every message durable (Kafka acks=all, a
 * RabbitMQ publisher confirm, an SQS SendMessage response). Rejects with a `PublishError` otherwise; the caller
 * must then not settle the source message.
 */
export interface Publisher {
  publish(messages: readonly OutgoingMessage[]): Promise<void>;
  close(): Promise<void>;
}

/** One message read from a dead-letter queue. */
export interface DeadLetterEntry {
  /** The message id (from the DLQ headers), `undefined` when the dead letter had none. */
  readonly id: string | undefined;
  readonly body: Uint8Array | string | null;
  readonly headers: Readonly<Record<string, string>>;
  /** Where the DLQ copy sits (for display): topic:partition:offset, queue, SQS MessageId. */
  readonly position: string;
}

/** A dead letter taken for replay: settle it once its copy was published back to the source. */
export interface TakenDeadLetter extends DeadLetterEntry {
  /** Removes it from the DLQ (ack / delete / commit the replay group's offset). */
  remove(): Promise<void>;
  /** Leaves it in the DLQ, unchanged in content (it may move to the back of a queue). */
  release(): Promise<void>;
}

/** Read access to one transport's DLQ, used by the CLI's `dlq list` and `dlq replay`. */
export interface DeadLetterQueueReader {
  /**
   * True when `browse` leaves the DLQ untouched (Kafka: reading a topic consumes nothing). False when the
   * broker has no peek (SQS, RabbitMQ): browsing then receives and releases, which may reorder or raise
   * receive counts, and the CLI says so.
   */
  readonly nonDestructiveBrowse: boolean;
  /** Reads up to `limit` entries without removing them. */
  browse(options: { readonly limit: number }): AsyncIterable<DeadLetterEntry>;
  /** Takes entries one at a time for replay; each must be removed or released. */
  take(options: { readonly limit: number }): AsyncIterable<TakenDeadLetter>;
  close(): Promise<void>;
}
