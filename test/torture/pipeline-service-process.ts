// The pipeline torture's service process: a RabbitMQ consumer over idempotentConsumer() + PostgresInboxStore
// with `outbox: transactionalOutbox()`. For each source message its handler writes one row into `effects` and
// enqueues one outgoing message for the destination topic through `context.outbox` — both in the inbox
// transaction, the outgoing id derived from (service, source id, step) so every attempt emits the same id.
// Poison and transient payloads behave as in consumer-process.ts (a transient id fails its first attempt after
// both writes, which must roll back). Prints `ready`, then `o <status> <id>` per outcome; SIGTERM stops it.
//
// `broken: true` (the pipeline's self-test) publishes straight to Kafka from the handler with a fresh id,
// before the transaction commits — the dual write the outbox exists to remove.
//
//   node --conditions=@inboxkit/source --import tsx test/torture/pipeline-service-process.ts '<json settings>'

import { setTimeout as sleep } from 'node:timers/promises';

import { idempotentConsumer, PermanentError, RetryableError } from '@inboxkit/core';
import type { Logger } from '@inboxkit/core';
import { PostgresInboxStore } from '@inboxkit/core/postgres';
import { transactionalOutbox, uuidv7 } from '@inboxkit/outbox';
import { rabbitmqConsumer } from '@inboxkit/rabbitmq';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import type { Producer } from 'kafkajs';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Transaction } from 'kysely';
import pg from 'pg';
import { z } from 'zod';

import { OUTCOME_CODES } from './consumer-settings.js';
import type { PipelineServiceSettings } from './pipeline-settings.js';
import { PIPELINE_STEP } from './pipeline-settings.js';

const settings = JSON.parse(process.argv[2] ?? '{}') as PipelineServiceSettings;

const payloadSchema = z.object({
  n: z.number().int(),
  amount: z.number().int(),
  mode: z.enum(['ok', 'permanent', 'transient']),
});
type Payload = z.infer<typeof payloadSchema>;

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
pool.on('error', (error) => process.stderr.write(`pool error ${error.message}\n`));
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const effects = sql.table(`${settings.schema}.effects`);

let producer: Producer | undefined;
if (settings.broken) {
  const kafka = new Kafka({
    clientId: `pipeline-broken-${settings.index}`,
    brokers: [...settings.kafkaBrokers],
    logLevel: logLevel.NOTHING,
  });
  producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
}

const consumer = idempotentConsumer<Payload, Transaction<unknown>>({
  name: settings.consumerName,
  store: new PostgresInboxStore<unknown>({ db, schema: settings.schema }),
  outbox: transactionalOutbox({ schema: settings.schema }),
  schema: payloadSchema,
  maxAttempts: settings.maxAttempts,
  backoff: { initialDelayMs: 100, multiplier: 2, maxDelayMs: 1_000 },
  handlerTimeoutMs: 3_000,
  lockTimeoutMs: 2_000,
  logger,
  handler: async (message, { tx, attempt, outbox }) => {
    if (settings.handlerDelayMs > 0) await sleep(Math.random() * settings.handlerDelayMs);
    const { mode, n } = message.payload;
    if (mode === 'permanent') throw new PermanentError(`poison ${message.id}: rejected by the handler`);
    await sql`INSERT INTO ${effects} (message_id, pid) VALUES (${message.id}, ${process.pid})`.execute(tx);
    const outgoing = {
      destination: settings.sinkTopic,
      key: `k${n % 64}`,
      headers: { 'x-source-id': message.id },
      body: JSON.stringify(message.payload),
    };
    if (producer !== undefined) {
      await producer.send({
        topic: outgoing.destination,
        acks: -1,
        messages: [
          {
            key: outgoing.key,
            value: outgoing.body,
            headers: { ...outgoing.headers, 'message-id': uuidv7() },
          },
        ],
      });
    } else {
      await outbox.enqueue(outgoing, { step: PIPELINE_STEP });
    }
    if (mode === 'transient' && attempt === 1)
      throw new RetryableError(
        `transient ${message.id}: first attempt fails after its effect and its enqueue`,
      );
  },
  hooks: {
    onOutcome: ({ outcome, message }) => {
      process.stdout.write(`o ${OUTCOME_CODES[outcome.status]} ${outcome.messageId ?? message.id ?? '-'}\n`);
    },
  },
});

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
process.stdout.write('ready\n');

process.once('SIGTERM', () => {
  void (async () => {
    await transport.stop();
    await producer?.disconnect().catch(() => undefined);
    await db.destroy();
    process.exit(0);
  })();
});
