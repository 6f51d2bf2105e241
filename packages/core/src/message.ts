// The message model shared by core and every transport: what a transport hands to `handle()`, and what the
// handler sees after decoding.

/** Where a delivery came from, for DLQ headers, logs and replay. Transports fill what applies. */
export interface SourceCoordinates {
  /** `kafka`, `rabbitmq`, `sqs`, `memory`, or a custom transport's name. */
  readonly transport: string;
  /** Kafka topic, RabbitMQ queue or SQS queue URL the message was consumed from. */
  readonly destination?: string;
  readonly partition?: number;
  /** Kafka offset, as a decimal string. */
  readonly offset?: string;
  readonly exchange?: string;
  readonly routingKey?: string;
  /** The broker's own id of this copy (SQS MessageId, AMQP delivery tag …). Never used for dedupe by default. */
  readonly brokerMessageId?: string;
}

/** Present when a delivery is an explicit replay of a dead letter (set by `inboxkit dlq replay`). */
export interface ReplayMarker {
  /** One id per replay run; a dead letter is reopened at most once per replay id. */
  readonly replayId: string;
  /** Who asked for the replay (user or tool), for the audit record. */
  readonly requestedBy?: string;
  readonly requestedAt?: Date;
}

/** One delivery as a transport hands it to `IdempotentConsumer.handle()`. */
export interface InboundMessage {
  /**
   * The producer's id of the intent (a header, CloudEvents id, or a user function), or `undefined` when the
   * transport found none: core then dead-letters it with reason `missing-id`.
   */
  readonly id: string | undefined;
  /** The raw body. Core decodes it (JSON by default) and validates it against the consumer's schema. */
  readonly body: Uint8Array | string | null;
  /** Headers / attributes, lower-cased names, string values. */
  readonly headers: Readonly<Record<string, string>>;
  /** The producer's timestamp of the message, used by the late-message rule. */
  readonly timestamp?: Date;
  /**
   * The attempt this delivery is by what the message itself carries, this one included (RabbitMQ: the attempts
   * a retry copy carries, + 1). Core counts attempts as the larger of this and its durable count, so it must
   * count attempts only: never a broker's count of deliveries (SQS ApproximateReceiveCount, a quorum queue's
   * x-delivery-count), which also rises for messages received but never run — a transport that must catch crash
   * loops records a started attempt before a redelivery runs instead (`recordAttemptsStarted`).
   */
  readonly deliveryCount?: number;
  readonly replay?: ReplayMarker;
  readonly source: SourceCoordinates;
}

/** The message as the handler sees it: decoded, validated, with its id. */
export interface DecodedMessage<P> {
  readonly id: string;
  readonly payload: P;
  readonly headers: Readonly<Record<string, string>>;
  readonly timestamp: Date | undefined;
  readonly source: SourceCoordinates;
  readonly replay: ReplayMarker | undefined;
}
