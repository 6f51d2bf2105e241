// What the replay suite needs from one transport on its real broker: a fresh source with its DLQ, a running
// transport consumer feeding a core consumer, and ways to look at (and refill) the DLQ from outside the CLI.

import type { DeadLetterEntry, IdempotentConsumer } from '@inboxkit/core';

/** A transport bound to fresh names on its real broker. */
export interface ReplayFixture {
  readonly transport: 'kafka' | 'rabbitmq' | 'sqs' | 'nats';
  /** The `--from` value of the DLQ. */
  readonly dlq: string;
  /** The CLI's connection flags for this broker. */
  readonly cliArgs: readonly string[];
  /** Starts the transport consumer on the source, feeding `consumer`. */
  start(consumer: IdempotentConsumer<unknown, unknown>): Promise<void>;
  /** Stops the transport consumer. */
  stop(): Promise<void>;
  /** Publishes to the source with the broker's confirmation. */
  publish(messages: readonly { id: string; body: string }[]): Promise<void>;
  /** Every dead letter in the DLQ now (read without removing any). */
  deadLetters(): Promise<DeadLetterEntry[]>;
  /** Puts copies of dead letters back into the DLQ (headers and body as read). */
  restore(entries: readonly DeadLetterEntry[]): Promise<void>;
  /** How many dead letters the DLQ holds. */
  dlqDepth(): Promise<number>;
  /** A comparable snapshot of the source (depth, or end offsets): equal before and after = untouched. */
  sourceState(): Promise<string>;
  dispose(): Promise<void>;
}
