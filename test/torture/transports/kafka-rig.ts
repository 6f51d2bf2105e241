// The Kafka side of a torture run: a topic with 6 partitions and its `.dlq`, an idempotent producer (acks -1),
// group lag as the backlog, the DLQ read with the transport's own reader, and a real broker restart. The
// consumers run on the client `client` names; the rig's own producer, lag and DLQ reads use kafkajs.

import { HEADERS } from '@inboxkit/core';
import { kafkaDeadLetterQueue } from '@inboxkit/kafka';
import { uniqueName } from '@inboxkit/testing';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { Admin, Producer } from 'kafkajs';

import { requireService, restartService } from '../../support/services.js';
import type { KafkaTortureClient } from '../consumer-settings.js';
import type { PlannedMessage } from '../message-plan.js';
import type { DeadLetterCopy, TransportRig } from './transport-rig.js';
import { retrying } from './transport-rig.js';

const PARTITIONS = 6;

/** Which path of the transport the consumers run: `mixed` alternates `message` and `batch` by slot. */
export type KafkaTortureMode = 'mixed' | 'message' | 'batch';

export function kafkaRig(
  options: { readonly mode?: KafkaTortureMode; readonly client?: KafkaTortureClient } = {},
): TransportRig {
  const mode = options.mode ?? 'mixed';
  const client = options.client ?? 'kafkajs';
  const brokers = requireService('kafka').brokers;
  const kafka = new Kafka({
    clientId: 'torture-harness',
    brokers,
    logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 200, retries: 10, maxRetryTime: 2_000 },
  });
  const topic = uniqueName('torture');
  const dlq = `${topic}.dlq`;
  const groupId = `${topic}-group`;
  let producer: Producer | undefined;
  let resent = 0;

  async function withAdmin<T>(work: (admin: Admin) => Promise<T>): Promise<T> {
    const admin = kafka.admin();
    await admin.connect();
    try {
      return await work(admin);
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }

  async function connectedProducer(): Promise<Producer> {
    if (producer === undefined) {
      const p = kafka.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        createPartitioner: Partitioners.DefaultPartitioner,
      });
      await p.connect();
      producer = p;
    }
    return producer;
  }

  return {
    name: 'kafka',
    restartLabel: 'Kafka broker restarted',
    get resent() {
      return resent;
    },
    async setup() {
      // A busy broker sometimes answers the leader wait with "does not host this topic-partition": try again.
      await retrying(
        'kafka createTopics',
        () =>
          withAdmin((admin) =>
            admin.createTopics({
              waitForLeaders: true,
              topics: [
                { topic, numPartitions: PARTITIONS, replicationFactor: 1 },
                { topic: dlq, numPartitions: 1, replicationFactor: 1 },
              ],
            }),
          ),
        60_000,
      );
    },
    consumerSettings(index) {
      // Mixed: consumers alternate between the single-message and the batch path of the transport.
      return {
        kafka: {
          brokers,
          topic,
          groupId,
          mode: mode === 'mixed' ? (index % 2 === 0 ? 'message' : 'batch') : mode,
          partitionConcurrency: 2,
          client,
        },
      };
    },
    async send(messages: readonly PlannedMessage[]) {
      let first = true;
      await retrying(
        'kafka send',
        async () => {
          if (!first) resent += messages.length;
          first = false;
          const p = await connectedProducer();
          await p.send({
            topic,
            acks: -1,
            messages: messages.map((m) => ({ key: m.key, value: m.body, headers: { 'message-id': m.id } })),
          });
        },
        240_000,
        () => {
          const old = producer;
          producer = undefined;
          void old?.disconnect().catch(() => undefined);
        },
      );
    },
    async backlog() {
      try {
        return await withAdmin(async (admin) => {
          const ends = await admin.fetchTopicOffsets(topic);
          const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
          let lag = 0;
          for (const end of ends) {
            const c = committed?.partitions.find((p) => p.partition === end.partition);
            const at = c === undefined || Number(c.offset) < 0 ? Number(end.low) : Number(c.offset);
            lag += Math.max(0, Number(end.high) - at);
          }
          return lag;
        });
      } catch {
        return undefined;
      }
    },
    async readDeadLetters() {
      const reader = kafkaDeadLetterQueue({ kafka, topic: dlq, idleTimeoutMs: 5_000 });
      const copies: DeadLetterCopy[] = [];
      try {
        for await (const entry of reader.browse({ limit: 1_000_000 }))
          copies.push({ id: entry.id, reason: entry.headers[HEADERS.reason] });
      } finally {
        await reader.close();
      }
      return copies;
    },
    async restartBroker() {
      await restartService('kafka', { timeoutMs: 240_000 });
      return 'kafka restarted (services.sh restart kafka)';
    },
    async teardown() {
      await producer?.disconnect().catch(() => undefined);
      await withAdmin(async (admin) => {
        await admin.deleteTopics({ topics: [topic, dlq] }).catch(() => undefined);
        await admin.deleteGroups([groupId]).catch(() => undefined);
      }).catch(() => undefined);
    },
  };
}
