// The port the demo's story runs against: the learning transport in memory, or Kafka, RabbitMQ or SQS with
// the transport packages' own consumer, publisher and DLQ reader. The story never knows which.

import type { DeadLetterQueueReader, IdempotentConsumer, Publisher } from '@inboxkit/core';

import type { StoryMessage } from './story.js';

/** The transports the demo runs on. */
export const TRANSPORT_NAMES = ['learning', 'kafka', 'rabbitmq', 'sqs', 'nats'] as const;
export type TransportName = (typeof TRANSPORT_NAMES)[number];

/** Where a crash is injected (the learning transport's seams). */
export type DemoCrashSeam = 'after-handler-before-commit' | 'after-commit-before-ack';

/** What reached the consumer, counted by the transport side. */
export interface DeliveryCounts {
  /** Every delivery handed to the consumer, redeliveries and crashed ones included. */
  readonly deliveries: number;
  readonly distinctIds: number;
  /** First deliveries of a second copy of an id (a double click). */
  readonly duplicateCopies: number;
  /** Deliveries of a copy that had been delivered before (after a crash or a retry). */
  readonly redeliveries: number;
  readonly crashes: Readonly<Record<DemoCrashSeam, number>>;
}

export interface DemoTransport {
  readonly name: TransportName;
  /** The header's lines about the transport (each under 90 characters). */
  readonly label: readonly string[];
  /** The transport name the replay engine matches against a dead letter's source (`memory` for learning). */
  readonly replayTransport: string;
  /** Starts a consumer process running `consumer` (a deployment of one version of the handler). */
  startConsumer<P, Tx>(consumer: IdempotentConsumer<P, Tx>): Promise<void>;
  /** Stops it: drains in-flight work and settles (acks, commits, deletes) what finished. */
  stopConsumer(): Promise<void>;
  /** Publishes with the broker's confirmation, in order. */
  publish(messages: readonly StoryMessage[]): Promise<void>;
  /** Arms one crash for the next delivery of `id` that reaches `seam`. */
  injectCrash(seam: DemoCrashSeam, id: string): void;
  /** Resolves once every message published so far is acked or dead-lettered, and the DLQ holds `deadLetters`. */
  settle(deadLetters: number, timeoutMs: number): Promise<void>;
  deliveryCounts(): DeliveryCounts;
  /** Dead letters not yet removed (replayed) from the DLQ. */
  deadLetterCount(): Promise<number>;
  /** A reader of the DLQ, the one `inboxkit dlq list|replay` would open. The caller closes it. */
  deadLetterReader(): DeadLetterQueueReader;
  /** The publisher replays go through. */
  readonly publisher: Publisher;
  /** Stops everything and removes what the run created on the broker. */
  close(): Promise<void>;
}
