// The slice of amqplib's types this package uses, declared structurally so amqplib's own connection and
// channel objects fit, and so do wrappers or alternative clients with the same promise API.

/** A listener of an emitter event, as Node's EventEmitter types it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- matches EventEmitter's own listener type
export type AmqpListener = (...args: any[]) => void;

/** The fields of a delivery (amqplib `Message.fields`). */
export interface AmqpMessageFields {
  readonly deliveryTag: number;
  readonly redelivered: boolean;
  readonly exchange: string;
  readonly routingKey: string;
  readonly consumerTag?: string;
  readonly messageCount?: number;
}

/** AMQP basic properties of a delivery (amqplib `Message.properties`). */
export interface AmqpMessageProperties {
  readonly contentType?: unknown;
  readonly contentEncoding?: unknown;
  readonly headers?: Readonly<Record<string, unknown>> | undefined;
  readonly deliveryMode?: unknown;
  readonly priority?: unknown;
  readonly correlationId?: unknown;
  readonly replyTo?: unknown;
  readonly expiration?: unknown;
  readonly messageId?: unknown;
  readonly timestamp?: unknown;
  readonly type?: unknown;
  readonly userId?: unknown;
  readonly appId?: unknown;
}

/** One delivery (amqplib `ConsumeMessage` / `GetMessage`). */
export interface AmqpMessage {
  readonly content: Buffer;
  readonly fields: AmqpMessageFields;
  readonly properties: AmqpMessageProperties;
}

/** Options of `publish` this package sets (amqplib `Options.Publish`). */
export interface AmqpPublishOptions {
  messageId?: string;
  headers?: Record<string, unknown>;
  persistent?: boolean;
  mandatory?: boolean;
  expiration?: string;
  contentType?: string;
  contentEncoding?: string;
  correlationId?: string;
  replyTo?: string;
  type?: string;
  appId?: string;
  priority?: number;
  timestamp?: number;
}

/** A channel (amqplib `Channel`). */
export interface AmqpChannel {
  on(event: string, listener: AmqpListener): unknown;
  removeListener(event: string, listener: AmqpListener): unknown;
  assertQueue(
    queue: string,
    options?: { durable?: boolean; arguments?: Record<string, unknown> },
  ): Promise<unknown>;
  assertExchange(exchange: string, type: string, options?: { durable?: boolean }): Promise<unknown>;
  bindQueue(queue: string, source: string, pattern: string): Promise<unknown>;
  checkQueue(queue: string): Promise<{ readonly messageCount: number; readonly consumerCount: number }>;
  prefetch(count: number, global?: boolean): Promise<unknown>;
  consume(
    queue: string,
    onMessage: (message: AmqpMessage | null) => void,
    options?: { noAck?: boolean },
  ): Promise<{ readonly consumerTag: string }>;
  cancel(consumerTag: string): Promise<unknown>;
  get(queue: string, options?: { noAck?: boolean }): Promise<AmqpMessage | false>;
  ack(message: AmqpMessage, allUpTo?: boolean): void;
  nack(message: AmqpMessage, allUpTo?: boolean, requeue?: boolean): void;
  close(): Promise<void>;
}

/** A channel in confirm mode (amqplib `ConfirmChannel`): every publish is acked or nacked by the broker. */
export interface AmqpConfirmChannel extends AmqpChannel {
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: AmqpPublishOptions,
    callback: (err: unknown) => void,
  ): boolean;
}

/**
 * A connection (amqplib `ChannelModel`, or the recovering model amqplib returns with the `recovery` option).
 */
export interface AmqpConnection {
  on(event: string, listener: AmqpListener): unknown;
  removeListener(event: string, listener: AmqpListener): unknown;
  createChannel(): Promise<AmqpChannel>;
  createConfirmChannel(): Promise<AmqpConfirmChannel>;
  close(): Promise<void>;
}
