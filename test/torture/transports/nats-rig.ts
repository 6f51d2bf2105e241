// The NATS side of a torture run (JetStream, file storage): a stream and its DLQ stream made by the transport's
// ensureStreams, confirmed publishes, the durable consumer's pending + unacknowledged messages as the backlog,
// the DLQ read in place with the transport's reader, and a real broker restart (services.sh restart nats),
// checked to keep every message the stream held.

import { HEADERS } from '@inboxkit/core';
import { ensureStreams, natsDeadLetterQueue } from '@inboxkit/nats';
import { uniqueName } from '@inboxkit/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';

import { requireService, restartService } from '../../support/services.js';
import type { PlannedMessage } from '../message-plan.js';
import type { DeadLetterCopy, TransportRig } from './transport-rig.js';
import { retrying } from './transport-rig.js';

/** Short, so a killed consumer's messages are back within seconds; working() keeps the running ones. */
const ACK_WAIT_MS = 5_000;

export function natsRig(): TransportRig {
  const service = requireService('nats');
  const base = uniqueName('torture').replace(/[^a-zA-Z0-9]/g, '_');
  const stream = `T_${base}`;
  const subject = `torture.${base}`;
  const deadLetterStream = `TDLQ_${base}`;
  const deadLetterSubject = `torture-dlq.${base}`;
  const durable = `inbox_${base}`;
  let nc: NatsConnection | undefined;
  let resent = 0;

  const connection = () => {
    if (nc === undefined) throw new Error('natsRig: not set up');
    return nc;
  };

  /** Messages the durable consumer has not settled: never delivered, and delivered but unacknowledged. */
  async function backlog(): Promise<number> {
    const jsm = await jetstreamManager(connection(), { timeout: 5_000 });
    const info = await jsm.consumers.info(stream, durable);
    return info.num_pending + info.num_ack_pending;
  }

  async function storedMessages(): Promise<number> {
    const jsm = await jetstreamManager(connection(), { timeout: 5_000 });
    return (await jsm.streams.info(stream)).state.messages;
  }

  return {
    name: 'nats',
    restartLabel: 'nats-server restarted',
    get resent() {
      return resent;
    },
    async setup() {
      nc = await connect({ servers: service.url, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
      await ensureStreams({
        connection: nc,
        stream,
        subjects: [subject],
        deadLetterStream,
        deadLetterSubject,
      });
    },
    consumerSettings() {
      return {
        nats: {
          url: service.url,
          stream,
          durable,
          deadLetterSubject,
          concurrency: 8,
          ackWaitMs: ACK_WAIT_MS,
        },
      };
    },
    async send(messages: readonly PlannedMessage[]) {
      const js = jetstream(connection(), { timeout: 5_000 });
      for (const m of messages) {
        let first = true;
        await retrying('nats publish', async () => {
          if (!first) resent++;
          first = false;
          // No msgID: the plan's duplicate sends must reach the consumers, so the inbox (not JetStream's
          // duplicate window) is what makes them apply once.
          const h = headers();
          h.set('message-id', m.id);
          await js.publish(subject, new TextEncoder().encode(m.body), { headers: h });
        });
      }
    },
    async backlog() {
      try {
        return await backlog();
      } catch {
        return undefined;
      }
    },
    async readDeadLetters() {
      const reader = natsDeadLetterQueue({ connection: connection(), stream: deadLetterStream });
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
      // Limits retention keeps every message (acked ones too) until the stream is deleted: the count after the
      // restart must be at least the count before. A memory store, or a lost store_dir, would come back empty.
      const before = await storedMessages();
      await restartService('nats', { timeoutMs: 240_000 });
      const after = await retrying('nats stream after the restart', storedMessages, 60_000);
      if (after < before)
        throw new Error(
          `nats-server lost ${before - after} of the stream's ${before} messages across its restart`,
        );
      return `nats: nats-server restarted (services.sh restart nats); the stream held ${before} messages before, ${after} after`;
    },
    async teardown() {
      if (nc === undefined) return;
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(stream).catch(() => undefined);
      await jsm.streams.delete(deadLetterStream).catch(() => undefined);
      await nc.close();
    },
  };
}
