// The RabbitMQ side of a torture run: the transport's topology (quorum work queue, delay queues, DLX and DLQ),
// a confirm channel for sends, queue depth as the backlog, the DLQ read with the transport's own reader, and
// a real broker restart (taken under the RabbitMQ tests' exclusive broker lock, so the package's own test
// files running at the same moment are not pulled from under).

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import { HEADERS } from '@inboxkit/core';
import { declareTopology, rabbitmqDeadLetterQueue } from '@inboxkit/rabbitmq';
import type { DeclaredTopology } from '@inboxkit/rabbitmq';
import { uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';

import { requireService, restartService } from '../../support/services.js';
import type { PlannedMessage } from '../message-plan.js';
import { exclusiveOrSharedLockHolder } from './rabbitmq-broker-lock.js';
import type { DeadLetterCopy, TransportRig } from './transport-rig.js';
import { retrying } from './transport-rig.js';

const DELAY_BUCKETS_MS = [100, 250, 500, 1_000, 2_000];

export function rabbitmqRig(options: { readonly log: (line: string) => void }): TransportRig {
  const onLocked = (): void =>
    options.log('broker lock taken (no RabbitMQ test file is using the broker): restarting now');
  const service = requireService('rabbitmq');
  const queue = uniqueName('torture');
  let topology: DeclaredTopology | undefined;
  let connection: amqp.ChannelModel | undefined;
  let channel: amqp.ConfirmChannel | undefined;
  let resent = 0;
  let releaseShared: (() => void) | undefined;

  async function confirmChannel(): Promise<amqp.ConfirmChannel> {
    if (channel === undefined) {
      const c = await amqp.connect(service.url);
      c.on('error', () => undefined);
      c.on('close', () => {
        if (connection === c) {
          connection = undefined;
          channel = undefined;
        }
      });
      const ch = await c.createConfirmChannel();
      ch.on('error', () => undefined);
      connection = c;
      channel = ch;
    }
    return channel;
  }

  function drop(): void {
    const c = connection;
    connection = undefined;
    channel = undefined;
    void c?.close().catch(() => undefined);
  }

  async function allQueues(): Promise<string[]> {
    const t = topology!;
    return [t.queue, ...t.delayBucketsMs.map((ms) => t.delayQueue(ms))];
  }

  return {
    name: 'rabbitmq',
    restartLabel: 'RabbitMQ broker restarted',
    get resent() {
      return resent;
    },
    async setup() {
      // The package's broker-restart test must not restart RabbitMQ in the middle of this run.
      releaseShared = await exclusiveOrSharedLockHolder('shared');
      const ch = await confirmChannel();
      topology = await declareTopology(ch, { queue, delayBucketsMs: DELAY_BUCKETS_MS });
    },
    consumerSettings(index) {
      // Consumers alternate between one message per transaction and batches of up to 4.
      return {
        rabbitmq: {
          url: service.url,
          queue,
          concurrency: 4,
          maxBatchSize: index % 2 === 0 ? 1 : 4,
          delayBucketsMs: DELAY_BUCKETS_MS,
        },
      };
    },
    async send(messages: readonly PlannedMessage[]) {
      let first = true;
      await retrying(
        'rabbitmq send',
        async () => {
          if (!first) resent += messages.length;
          first = false;
          const ch = await confirmChannel();
          for (const m of messages)
            ch.sendToQueue(queue, Buffer.from(m.body), {
              messageId: m.id,
              persistent: true,
              contentType: 'application/json',
            });
          await ch.waitForConfirms();
        },
        240_000,
        drop,
      );
    },
    async backlog() {
      // Ready + unacknowledged, from rabbitmqctl when we have it (AMQP's queue.declare counts ready ones only).
      try {
        const names = new Set(await allQueues());
        if (service.ctl !== undefined) {
          const { stdout } = await promisify(execFile)(
            service.ctl,
            ['list_queues', '-q', '--no-table-headers', 'name', 'messages'],
            {
              timeout: 30_000,
            },
          );
          let total = 0;
          for (const line of stdout.split('\n')) {
            const [name, count] = line.trim().split(/\s+/);
            if (name !== undefined && names.has(name)) total += Number(count);
          }
          return total;
        }
        const ch = await confirmChannel();
        let total = 0;
        for (const name of names) total += (await ch.checkQueue(name)).messageCount;
        return total;
      } catch {
        return undefined;
      }
    },
    async readDeadLetters() {
      const c = await amqp.connect(service.url);
      c.on('error', () => undefined);
      const reader = rabbitmqDeadLetterQueue({ connection: c, queue });
      const copies: DeadLetterCopy[] = [];
      try {
        for await (const entry of reader.browse({ limit: 1_000_000 }))
          copies.push({ id: entry.id, reason: entry.headers[HEADERS.reason] });
      } finally {
        await reader.close();
        await c.close().catch(() => undefined);
      }
      return copies;
    },
    async restartBroker() {
      // Let go of the shared lock first: a test file waiting for the exclusive one would otherwise wait for us
      // while we wait for it.
      releaseShared?.();
      const release = await exclusiveOrSharedLockHolder('exclusive');
      onLocked();
      try {
        drop();
        await restartService('rabbitmq', { timeoutMs: 240_000 });
      } finally {
        release();
        releaseShared = await exclusiveOrSharedLockHolder('shared');
      }
      return 'rabbitmq restarted (services.sh restart rabbitmq)';
    },
    async teardown() {
      try {
        const ch = await confirmChannel();
        const t = topology;
        if (t !== undefined) {
          for (const q of [...(await allQueues()), t.deadLetterQueue])
            await ch.deleteQueue(q).catch(() => undefined);
          await ch.deleteExchange(t.deadLetterExchange).catch(() => undefined);
        }
      } catch {
        // The broker is gone: nothing to clean.
      }
      drop();
      releaseShared?.();
    },
  };
}
