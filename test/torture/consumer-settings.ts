// What the harness passes to each consumer process (as JSON on its command line), and the one-letter outcome
// codes the process prints back.

import type { OutcomeStatus } from '@inboxkit/core';

export type TransportName = 'kafka' | 'rabbitmq' | 'sqs' | 'nats';
/** The Kafka clients a torture run can put its Kafka consumers on. */
export const KAFKA_TORTURE_CLIENTS = ['kafkajs', 'platformatic'] as const;
export type KafkaTortureClient = (typeof KAFKA_TORTURE_CLIENTS)[number];
export const TRANSPORTS: readonly TransportName[] = ['kafka', 'rabbitmq', 'sqs', 'nats'];

export interface ConsumerSettings {
  readonly transport: TransportName;
  /** 0-based slot of this consumer; a restarted consumer keeps its slot. */
  readonly index: number;
  /** The idempotent consumer's name (the inbox scope), the same for every process of one run. */
  readonly consumerName: string;
  readonly databaseUrl: string;
  /** The run's own schema: the inbox tables and `effects`. */
  readonly schema: string;
  readonly poolSize: number;
  readonly maxAttempts: number;
  /** Upper bound of a random pause in the handler, in ms. */
  readonly handlerDelayMs: number;
  /** The self-test's deliberately non-idempotent handler (effect outside the inbox transaction). */
  readonly broken: boolean;
  readonly kafka?: {
    readonly brokers: string[];
    readonly topic: string;
    readonly groupId: string;
    readonly mode: 'message' | 'batch';
    readonly partitionConcurrency: number;
    /** The Kafka client the consumer runs on: kafkajs, or @platformatic/kafka through platformaticKafka(). */
    readonly client: KafkaTortureClient;
  };
  readonly rabbitmq?: {
    readonly url: string;
    readonly queue: string;
    readonly concurrency: number;
    readonly maxBatchSize: number;
    readonly delayBucketsMs: readonly number[];
  };
  readonly sqs?: {
    readonly endpoint: string;
    readonly queueUrl: string;
    readonly deadLetterQueueUrl: string;
    readonly concurrency: number;
    readonly visibilityTimeoutSeconds: number;
  };
  readonly nats?: {
    readonly url: string;
    readonly stream: string;
    readonly durable: string;
    readonly deadLetterSubject: string;
    readonly concurrency: number;
    readonly ackWaitMs: number;
  };
}

export const OUTCOME_CODES: Readonly<Record<OutcomeStatus, string>> = {
  processed: 'p',
  duplicate: 'd',
  retry: 'r',
  'dead-letter': 'x',
};

export const OUTCOME_BY_CODE: Readonly<Record<string, OutcomeStatus>> = {
  p: 'processed',
  d: 'duplicate',
  r: 'retry',
  x: 'dead-letter',
};
