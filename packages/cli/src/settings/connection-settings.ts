// Where the CLI connects: each setting from its flag, else the environment variable the tests and the
// services script use (DATABASE_URL, KAFKA_BROKERS, AMQP_URL, SQS_ENDPOINT, AWS_REGION).

import { maskConnectionString } from './mask-connection-string.js';

/** Connection settings after flags and environment were merged. Absent = not configured. */
export interface ConnectionSettings {
  /** Postgres URL. Flag `--database-url`, env `DATABASE_URL`. */
  readonly databaseUrl?: string | undefined;
  /** Schema of the inbox table. Flag `--schema`, env `INBOXKIT_SCHEMA`. Default is `inboxkit` (core's default). */
  readonly schema: string;
  /** Name of the inbox table. Flag `--table`, env `INBOXKIT_TABLE`. Default is `inbox`. */
  readonly table: string;
  /** Kafka bootstrap brokers. Flag `--kafka-brokers host:port,…`, env `KAFKA_BROKERS`. */
  readonly kafkaBrokers?: readonly string[] | undefined;
  /**
   * The Kafka client library the CLI talks through. Flag `--kafka-client kafkajs|platformatic`, env
   * `INBOXKIT_KAFKA_CLIENT`. Absent = kafkajs when it is installed, else `@platformatic/kafka`.
   */
  readonly kafkaClient?: KafkaClientName | undefined;
  /** RabbitMQ URL. Flag `--amqp-url`, env `AMQP_URL`. */
  readonly amqpUrl?: string | undefined;
  /** SQS endpoint (ElasticMQ, LocalStack); absent = AWS. Flag `--sqs-endpoint`, env `SQS_ENDPOINT`. */
  readonly sqsEndpoint?: string | undefined;
  /** NATS server URL (JetStream). Flag `--nats-url`, env `NATS_URL`. */
  readonly natsUrl?: string | undefined;
  /** AWS region. Flag `--region`, env `AWS_REGION` / `AWS_DEFAULT_REGION`. Default is `us-east-1`. */
  readonly region: string;
}

/** The flags `resolveConnectionSettings` reads (as `parseArgs` returns them). */
export interface ConnectionFlags {
  readonly 'database-url'?: string | undefined;
  readonly schema?: string | undefined;
  readonly table?: string | undefined;
  readonly 'kafka-brokers'?: string | undefined;
  readonly 'kafka-client'?: string | undefined;
  readonly 'amqp-url'?: string | undefined;
  readonly 'sqs-endpoint'?: string | undefined;
  readonly 'nats-url'?: string | undefined;
  readonly region?: string | undefined;
}

/** The Kafka clients the CLI can use: `kafkajs`, or `platformatic` (the `@platformatic/kafka` package). */
export const KAFKA_CLIENTS = ['kafkajs', 'platformatic'] as const;
/** One of `KAFKA_CLIENTS`. */
export type KafkaClientName = (typeof KAFKA_CLIENTS)[number];

/** A `--kafka-client` / `INBOXKIT_KAFKA_CLIENT` value that names no client of `KAFKA_CLIENTS`. */
export class UnknownKafkaClientError extends Error {
  constructor(readonly value: string) {
    super(`unknown Kafka client ${JSON.stringify(value)}: use --kafka-client kafkajs or platformatic`);
    this.name = 'UnknownKafkaClientError';
  }
}

function kafkaClientOf(value: string | undefined): KafkaClientName | undefined {
  if (value === undefined) return undefined;
  if (!(KAFKA_CLIENTS as readonly string[]).includes(value)) throw new UnknownKafkaClientError(value);
  return value as KafkaClientName;
}

/** Default schema of the inbox table. */
export const DEFAULT_SCHEMA = 'inboxkit';
/** Default name of the inbox table. */
export const DEFAULT_TABLE = 'inbox';

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/**
 * Merges flags over environment variables over defaults. Throws `UnknownKafkaClientError` when the Kafka
 * client named is neither `kafkajs` nor `platformatic`.
 */
export function resolveConnectionSettings(
  flags: ConnectionFlags,
  env: Readonly<Record<string, string | undefined>>,
): ConnectionSettings {
  const brokers = nonEmpty(flags['kafka-brokers']) ?? nonEmpty(env.KAFKA_BROKERS);
  return Object.freeze({
    databaseUrl: nonEmpty(flags['database-url']) ?? nonEmpty(env.DATABASE_URL),
    schema: nonEmpty(flags.schema) ?? nonEmpty(env.INBOXKIT_SCHEMA) ?? DEFAULT_SCHEMA,
    table: nonEmpty(flags.table) ?? nonEmpty(env.INBOXKIT_TABLE) ?? DEFAULT_TABLE,
    kafkaBrokers:
      brokers === undefined
        ? undefined
        : brokers
            .split(',')
            .map((b) => b.trim())
            .filter(Boolean),
    kafkaClient: kafkaClientOf(nonEmpty(flags['kafka-client']) ?? nonEmpty(env.INBOXKIT_KAFKA_CLIENT)),
    amqpUrl: nonEmpty(flags['amqp-url']) ?? nonEmpty(env.AMQP_URL),
    sqsEndpoint: nonEmpty(flags['sqs-endpoint']) ?? nonEmpty(env.SQS_ENDPOINT),
    natsUrl: nonEmpty(flags['nats-url']) ?? nonEmpty(env.NATS_URL),
    region:
      nonEmpty(flags.region) ?? nonEmpty(env.AWS_REGION) ?? nonEmpty(env.AWS_DEFAULT_REGION) ?? 'us-east-1',
  });
}

/** The settings with secrets masked, for output. */
export function describeConnectionSettings(settings: ConnectionSettings): Record<string, string> {
  const out: Record<string, string> = {};
  if (settings.databaseUrl !== undefined) out.database = maskConnectionString(settings.databaseUrl);
  out.inbox = `${settings.schema}.${settings.table}`;
  if (settings.kafkaBrokers !== undefined)
    out.kafka =
      settings.kafkaBrokers.join(',') +
      (settings.kafkaClient !== undefined ? ` (${settings.kafkaClient})` : '');
  if (settings.amqpUrl !== undefined) out.rabbitmq = maskConnectionString(settings.amqpUrl);
  if (settings.natsUrl !== undefined) out.nats = maskConnectionString(settings.natsUrl);
  if (settings.sqsEndpoint !== undefined)
    out.sqs = `${maskConnectionString(settings.sqsEndpoint)} (${settings.region})`;
  else out.sqs = `AWS (${settings.region})`;
  return out;
}
