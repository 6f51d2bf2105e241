// A DLQ the console reads and replays from, and the label the page and the API know it by.

import type { TransportName } from '../command-line.js';

/** A DLQ the console reads and replays from (`--dlq TRANSPORT:DLQ`). */
export interface ConsoleDlq {
  readonly transport: TransportName;
  /** Kafka topic, RabbitMQ queue, SQS queue URL or name. */
  readonly name: string;
  /** Kafka: the consumer group that tracks replay progress. Default is the CLI's (`inboxkit-dlq-replay.<DLQ>`). */
  readonly group?: string | undefined;
}

/** The label the page and the API use for a DLQ: `transport:name`, as given to `--dlq`. */
export function dlqId(dlq: ConsoleDlq): string {
  return `${dlq.transport}:${dlq.name}`;
}
