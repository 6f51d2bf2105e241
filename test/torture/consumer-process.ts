// One torture consumer process: the real transport consumer (Kafka, RabbitMQ, SQS or NATS) over PostgresInboxStore,
// whose handler applies a one-row effect in the inbox transaction. The harness SIGKILLs it at random moments
// and starts it again; SIGTERM stops it gracefully. It prints `ready` once consuming, then one line per
// outcome (`o <status> <id>`), which the harness counts (these lines are statistics only: the verdict comes
// from the effects table, the inbox and the DLQ).
//
// Poison: `mode: 'permanent'` makes the handler throw a PermanentError; a non-numeric `amount` fails the
// schema. `mode: 'transient'` makes the first attempt fail *after* its effect was written, so the effect must
// roll back with the inbox transaction.
//
// `broken: true` is the harness's self-test: the effect is written on its own connection, outside the inbox
// transaction (the classic mistake), so a failed or killed attempt leaves it behind and the retry applies it
// again. The checker must then report effects applied twice.
//
//   node --conditions=@inboxkit/source --import tsx test/torture/consumer-process.ts '<json settings>'

import { setTimeout as sleep } from 'node:timers/promises';

import { SQSClient } from '@aws-sdk/client-sqs';
import { idempotentConsumer, PermanentError, RetryableError } from '@inboxkit/core';
import type { IdempotentConsumer, Logger, TransportConsumer } from '@inboxkit/core';
import { PostgresInboxStore } from '@inboxkit/core/postgres';
import { kafkaConsumer, platformaticKafka } from '@inboxkit/kafka';
import type { KafkaClientLike } from '@inboxkit/kafka';
import * as platformatic from '@platformatic/kafka';
import { rabbitmqConsumer } from '@inboxkit/rabbitmq';
import { natsConsumer } from '@inboxkit/nats';
import { sqsConsumer } from '@inboxkit/sqs';
import { connect as natsConnect } from '@nats-io/transport-node';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';
import { z } from 'zod';

import type { ConsumerSettings } from './consumer-settings.js';
import { OUTCOME_CODES } from './consumer-settings.js';

const settings = JSON.parse(process.argv[2] ?? '{}') as ConsumerSettings;

const payloadSchema = z.object({
  n: z.number().int(),
  amount: z.number().int(),
  mode: z.enum(['ok', 'permanent', 'transient']),
});
type Payload = z.infer<typeof payloadSchema>;

// A real application would log through pino; these go to stderr, which the harness keeps for diagnosis.
const logger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: (obj, msg) => process.stderr.write(`warn ${msg ?? ''} ${brief(obj)}\n`),
  error: (obj, msg) => process.stderr.write(`error ${msg ?? ''} ${brief(obj)}\n`),
};

function brief(obj: object): string {
  const err = (obj as { err?: unknown }).err;
  return err instanceof Error ? `${err.name}: ${err.message}` : '';
}

const pool = new pg.Pool({ connectionString: settings.databaseUrl, max: settings.poolSize });
// A restarted Postgres closes idle connections: pg reports it on the pool; the next query reconnects.
pool.on('error', (error) => process.stderr.write(`pool error ${error.message}\n`));
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const effects = sql.table(`${settings.schema}.effects`);

const consumer: IdempotentConsumer<Payload, Transaction<unknown>> = idempotentConsumer<
  Payload,
  Transaction<unknown>
>({
  name: settings.consumerName,
  store: new PostgresInboxStore<unknown>({ db, schema: settings.schema }),
  schema: payloadSchema,
  maxAttempts: settings.maxAttempts,
  backoff: { initialDelayMs: 100, multiplier: 2, maxDelayMs: 1_000 },
  handlerTimeoutMs: 3_000,
  lockTimeoutMs: 2_000,
  logger,
  handler: async (message, { tx, attempt }) => {
    // A little work, so that kills land in every stage: received, handler running, committed but not settled.
    if (settings.handlerDelayMs > 0) await sleep(Math.random() * settings.handlerDelayMs);
    const { mode } = message.payload;
    if (mode === 'permanent') throw new PermanentError(`poison ${message.id}: rejected by the handler`);
    if (settings.broken) {
      await pool.query(`INSERT INTO "${settings.schema}".effects (message_id, pid) VALUES ($1, $2)`, [
        message.id,
        process.pid,
      ]);
    } else {
      await sql`INSERT INTO ${effects} (message_id, pid) VALUES (${message.id}, ${process.pid})`.execute(tx);
    }
    if (mode === 'transient' && attempt === 1)
      throw new RetryableError(`transient ${message.id}: first attempt fails after its effect`);
  },
  hooks: {
    onOutcome: ({ outcome, message }) => {
      process.stdout.write(`o ${OUTCOME_CODES[outcome.status]} ${outcome.messageId ?? message.id ?? '-'}\n`);
    },
  },
});

async function start(): Promise<{ transport: TransportConsumer; close: () => Promise<void> }> {
  switch (settings.transport) {
    case 'kafka': {
      const k = settings.kafka!;
      const kafka: KafkaClientLike =
        k.client === 'platformatic'
          ? platformaticKafka(platformatic, {
              clientId: `torture-${settings.index}`,
              bootstrapBrokers: k.brokers,
            })
          : new Kafka({
              clientId: `torture-${settings.index}`,
              brokers: k.brokers,
              logLevel: logLevel.NOTHING,
            });
      // Short session timeout: a SIGKILLed member leaves the group within seconds, as in a tuned deployment.
      const kc = kafka.consumer({
        groupId: k.groupId,
        sessionTimeout: 6_000,
        heartbeatInterval: 500,
        rebalanceTimeout: 3_000,
        maxWaitTimeInMs: 100,
      });
      const transport = kafkaConsumer({
        consumer: kc,
        kafka,
        topics: [k.topic],
        handler: consumer,
        mode: k.mode,
        partitionConcurrency: k.partitionConcurrency,
        fromBeginning: true,
        heartbeatIntervalMs: 500,
        closeTimeoutMs: 10_000,
      });
      await transport.start();
      return { transport, close: () => kc.disconnect() };
    }
    case 'rabbitmq': {
      const r = settings.rabbitmq!;
      const transport = rabbitmqConsumer({
        connect: () => amqp.connect(r.url),
        queue: r.queue,
        handler: consumer,
        concurrency: r.concurrency,
        maxBatchSize: r.maxBatchSize,
        topology: { delayBucketsMs: r.delayBucketsMs },
        reconnect: { initialDelayMs: 100, maxDelayMs: 1_000 },
        closeTimeoutMs: 10_000,
      });
      await transport.start();
      return { transport, close: async () => undefined };
    }
    case 'sqs': {
      const s = settings.sqs!;
      const client = new SQSClient({
        endpoint: s.endpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'torture', secretAccessKey: 'torture' },
        maxAttempts: 2,
      });
      const transport = sqsConsumer({
        client,
        queueUrl: s.queueUrl,
        deadLetterQueueUrl: s.deadLetterQueueUrl,
        handler: consumer,
        concurrency: s.concurrency,
        visibilityTimeoutSeconds: s.visibilityTimeoutSeconds,
        waitTimeSeconds: 1,
        closeTimeoutMs: 10_000,
      });
      await transport.start();
      return { transport, close: async () => client.destroy() };
    }
    case 'nats': {
      const n = settings.nats!;
      // Reconnects for ever, quickly: a broker restart is part of the run.
      const nc = await natsConnect({
        servers: n.url,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        waitOnFirstConnect: true,
      });
      const transport = natsConsumer({
        connection: nc,
        stream: n.stream,
        consumer: n.durable,
        deadLetterSubject: n.deadLetterSubject,
        handler: consumer,
        concurrency: n.concurrency,
        ackWaitMs: n.ackWaitMs,
        closeTimeoutMs: 10_000,
      });
      await transport.start();
      return { transport, close: () => nc.close() };
    }
  }
}

const running = await start();
process.stdout.write('ready\n');

process.once('SIGTERM', () => {
  void (async () => {
    await running.transport.stop();
    await running.close();
    await db.destroy();
    process.exit(0);
  })();
});
