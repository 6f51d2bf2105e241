// How commands reach Postgres and the brokers. `runCli` uses the real clients by default; a program that
// embeds the CLI (or a test) can pass its own, for example to reuse a pool.

import type { DeadLetterQueueReader, Publisher } from '@inboxkit/core';
import type { Kysely } from 'kysely';

import type { TransportName } from './command-line.js';
import type { ConnectionSettings } from './settings/connection-settings.js';

/** A Kysely instance over the inbox database, and how to let go of it. */
export interface OpenedDatabase {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the inbox schema is addressed by name at run time
  readonly db: Kysely<any>;
  close(): Promise<void>;
}

/** One transport's DLQ reader and publisher, and how to let go of both. */
export interface OpenedTransport {
  readonly reader: DeadLetterQueueReader;
  /** Absent when opened for reading only. */
  readonly publisher: Publisher | undefined;
  /** Turns a `--to` value into what the publisher expects (an SQS queue name into its URL). */
  resolveDestination(to: string): Promise<string>;
  close(): Promise<void>;
}

/** Options of `CliServices.openTransport`. */
export interface OpenTransportOptions {
  /** The DLQ: Kafka topic, RabbitMQ queue, SQS queue URL or name. */
  readonly from: string;
  /** Kafka: the consumer group whose committed offsets record what was removed. */
  readonly group?: string | undefined;
  /** Open a publisher too (replay). */
  readonly publish: boolean;
}

/** Factories of the connections commands use. */
export interface CliServices {
  openDatabase(settings: ConnectionSettings): Promise<OpenedDatabase>;
  openTransport(
    transport: TransportName,
    settings: ConnectionSettings,
    options: OpenTransportOptions,
  ): Promise<OpenedTransport>;
}
