// A row the relay sends again (a crash between the broker's confirm and mark-dispatched, simulated by clearing
// dispatched_at) reaches the consumer with the same timestamp both times — the row's enqueue time — on Kafka,
// RabbitMQ and SQS, as read by each transport's own InboundMessage conversion. A broker-stamped time would
// differ per send, and the partitioned inbox (keyed by the timestamp's UTC day) would run a resend across
// midnight twice. The row is enqueued "yesterday" (created_at moved back), so a broker stamp cannot pass.

import { silentLogger, type InboundMessage } from '@inboxkit/core';
import { kafkaPublisher } from '@inboxkit/kafka';
import { rabbitmqPublisher } from '@inboxkit/rabbitmq';
import { sqsPublisher } from '@inboxkit/sqs';
import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import amqp from 'amqplib';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTopics, FAST_GROUP, testKafka } from '../../kafka/test/kafka-harness.js';
import { toInboundMessage as kafkaInbound } from '../../kafka/src/to-inbound-message.js';
import { toInboundMessage as rabbitInbound } from '../../rabbitmq/src/inbound-message.js';
import { toInboundMessage as sqsInbound } from '../../sqs/src/to-inbound-message.js';
import { freshQueues, testSqsClient } from '../../sqs/test/support/sqs-test-client.js';
import { requireService, uniqueTestName } from '../../../test/support/services.js';
import type { Publisher } from '@inboxkit/core';
import { enqueue, startOutboxRelay } from '../src/index.js';
import { openOutboxDb, waitFor, type OutboxTestDb } from './support.js';

/** The row's enqueue time: a day before the test, with a sub-second part AMQP must truncate. */
const ENQUEUED = new Date(Math.floor(Date.now() / 1000) * 1000 - 86_400_000 + 437);

describe('the relay keeps a row timestamp on a resend', () => {
  let t: OutboxTestDb;

  beforeAll(async () => {
    t = await openOutboxDb('outbox_resend_ts');
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Enqueues one row enqueued at ENQUEUED, has the relay send it, then sends it again as after a crash. */
  async function sendTwice(publisher: Publisher, destination: string, extra: { routingKey?: string } = {}): Promise<string> {
    const schema = t.schema.schema;
    const outbox = sql.raw(`"${schema}"."outbox"`);
    const id = await t.db.transaction().execute((tx) =>
      enqueue(tx, { publisher: 'p', destination, ...extra, body: JSON.stringify({ n: 1 }) }, { schema }),
    );
    await sql`UPDATE ${outbox} SET created_at = ${ENQUEUED} WHERE id = ${id}`.execute(t.db);
    const relay = startOutboxRelay({ db: t.db, publishers: { p: publisher }, schema, pollIntervalMs: 10 });
    try {
      await waitFor(async () => (await t.backlog()) === 0);
      // The crash: the broker has the message, the row is not marked, so the next claim sends it again.
      await sql`UPDATE ${outbox} SET dispatched_at = NULL WHERE id = ${id}`.execute(t.db);
      await waitFor(async () => (await t.backlog()) === 0);
    } finally {
      await relay.stop();
    }
    return id;
  }

  it('on Kafka: both copies carry the enqueue time as the record timestamp', async () => {
    const kafka = testKafka();
    const topic = uniqueTestName('outbox-ts');
    const deleteTopics = await createTopics(kafka, [{ topic, partitions: 1 }]);
    const publisher = kafkaPublisher({ kafka });
    const consumer = kafka.consumer({ groupId: uniqueTestName('outbox-ts'), ...FAST_GROUP });
    const received: InboundMessage[] = [];
    try {
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({
        eachMessage: async ({ partition, message }) => {
          received.push(kafkaInbound(topic, partition, message, { messageId: undefined, useCoordinatesAsId: false, logger: silentLogger }));
        },
      });
      const id = await sendTwice(publisher, topic);
      await waitFor(() => received.length >= 2, 30_000);
      expect(received.map((m) => m.id)).toEqual([id, id]);
      expect(received.map((m) => m.timestamp?.toISOString())).toEqual([ENQUEUED.toISOString(), ENQUEUED.toISOString()]);
    } finally {
      await consumer.disconnect();
      await publisher.close();
      await deleteTopics();
    }
  });

  it('on RabbitMQ: both copies carry the enqueue time, in whole seconds, as the AMQP timestamp', async () => {
    const connection = await amqp.connect(requireService('rabbitmq').url);
    const received: InboundMessage[] = [];
    try {
      const channel = await connection.createConfirmChannel();
      const queue = uniqueTestName('outbox-ts-q');
      await channel.assertQueue(queue, { durable: false, autoDelete: true });
      await channel.bindQueue(queue, 'amq.direct', queue);
      await channel.consume(queue, (msg) => {
        if (msg === null) return;
        received.push(rabbitInbound(msg, queue, {}));
        channel.ack(msg);
      });
      const id = await sendTwice(rabbitmqPublisher({ channel }), 'amq.direct', { routingKey: queue });
      await waitFor(() => received.length >= 2);
      const seconds = new Date(Math.floor(ENQUEUED.getTime() / 1000) * 1000).toISOString();
      expect(received.map((m) => m.id)).toEqual([id, id]);
      expect(received.map((m) => m.timestamp?.toISOString())).toEqual([seconds, seconds]);
    } finally {
      await connection.close();
    }
  });

  it('on SQS: both copies carry the enqueue time, the attribute read before SentTimestamp', async () => {
    const client = testSqsClient();
    try {
      const { queueUrl } = await freshQueues(client, 'outbox-ts');
      const id = await sendTwice(sqsPublisher({ client }), queueUrl);
      const received: InboundMessage[] = [];
      const sentTimestamps: number[] = [];
      await waitFor(async () => {
        const { Messages = [] } = await client.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 10,
            MessageAttributeNames: ['All'],
            MessageSystemAttributeNames: ['SentTimestamp'],
            WaitTimeSeconds: 1,
          }),
        );
        for (const m of Messages) {
          sentTimestamps.push(Number(m.Attributes?.SentTimestamp));
          received.push(
            sqsInbound(m, {
              queueUrl,
              resolveMessageId: undefined,
              messageIdAttribute: 'message-id',
              messageIdBodyField: undefined,
              useSqsMessageIdAsId: false,
            }),
          );
          await client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
        }
        return received.length >= 2;
      }, 30_000);
      expect(received.map((m) => m.id)).toEqual([id, id]);
      // SQS stamped both sends today; the consumer sees the row's enqueue time instead.
      for (const sent of sentTimestamps) expect(sent).toBeGreaterThan(ENQUEUED.getTime() + 3_600_000);
      expect(received.map((m) => m.timestamp?.toISOString())).toEqual([ENQUEUED.toISOString(), ENQUEUED.toISOString()]);
    } finally {
      client.destroy();
    }
  });
});
