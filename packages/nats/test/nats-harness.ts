// The TransportHarness of the NATS transport, over a fresh stream pair (source + DLQ) on the test NATS server.
// Each consumer the harness starts gets a connection of its own, so `crash()` can drop it like a dying process: in
// flight messages are neither acked nor nak()ed and come back when their (short) ack wait ends.

import type { DeadLetterEntry, IdempotentConsumer, TransportConsumer } from '@inboxkit/core';
import type { HarnessConsumerOptions, HarnessMessage, TransportHarness } from '@inboxkit/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';

import { requireService, uniqueTestName } from '../../../test/support/services.js';
import { ensureStreams, natsConsumer, natsDeadLetterQueue, natsPublisher } from '../src/index.js';
import type { NatsConsumerOptions } from '../src/index.js';
import { writeHeaders } from '../src/nats-headers.js';

/** The harness's DLQ stream's `max_msg_size`. */
const DEAD_LETTER_MAX_BYTES = 64 * 1024;

/** Options of `natsHarness`. */
export interface NatsHarnessOptions {
  /** The consumers' ack wait. Default is 2,000 ms, so a crashed delivery is back within about two seconds. */
  readonly ackWaitMs?: number;
  /** Extra options for every consumer the harness starts. */
  readonly consumer?: Partial<
    Omit<
      NatsConsumerOptions<unknown, unknown>,
      'connection' | 'stream' | 'consumer' | 'deadLetterSubject' | 'handler'
    >
  >;
}

/** A harness plus what tests beyond the conformance suite use. */
export interface NatsHarness extends TransportHarness {
  readonly connection: NatsConnection;
  readonly stream: string;
  readonly subjectPrefix: string;
  readonly deadLetterStream: string;
  readonly deadLetterSubject: string;
  readonly durable: string;
}

/** A connection to the test NATS server. */
export async function testNatsConnection(): Promise<NatsConnection> {
  return connect({ servers: requireService('nats').url, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
}

/**
 * Builds a harness over a new stream pair. Messages with a `key` go to `<prefix>.<key>` (the ordering unit of
 * `orderedBySubject`), the others to `<prefix>.all`.
 *
 * @example
 * describeTransportConformance('nats', NATS_FEATURES, () => natsHarness(), { quietPeriodMs: 3_000 });
 */
export async function natsHarness(options: NatsHarnessOptions = {}): Promise<NatsHarness> {
  const connection = await testNatsConnection();
  const base = uniqueTestName('conf').replace(/-/g, '_');
  const stream = `S_${base}`;
  const subjectPrefix = `src.${base}`;
  const deadLetterStream = `DLQ_${base}`;
  const deadLetterSubject = `dlq.${base}`;
  const durable = `c_${base}`;
  await ensureStreams({
    connection,
    stream,
    subjects: [`${subjectPrefix}.>`],
    deadLetterStream,
    deadLetterSubject,
  });
  // The DLQ stream takes at most 64 KiB a message, so the oversized-dead-letter check's full dead letter (60 kB
  // of original headers and an 8 kB body) is refused as too large and a smaller form goes out.
  const jsm = await jetstreamManager(connection);
  const dlq = await jsm.streams.info(deadLetterStream);
  await jsm.streams.update(deadLetterStream, { ...dlq.config, max_msg_size: DEAD_LETTER_MAX_BYTES });
  const publisher = natsPublisher({ connection });
  const js = jetstream(connection);
  const running: { consumer: TransportConsumer; connection: NatsConnection }[] = [];
  const crashed: Promise<void>[] = [];
  const subjectOf = (m: HarnessMessage) => `${subjectPrefix}.${m.key ?? 'all'}`;

  return {
    connection,
    stream,
    subjectPrefix,
    deadLetterStream,
    deadLetterSubject,
    durable,

    async startConsumer(
      consumer: IdempotentConsumer<unknown, unknown>,
      consumerOptions: HarnessConsumerOptions = {},
    ) {
      const own = await testNatsConnection();
      const transport = natsConsumer({
        ackWaitMs: options.ackWaitMs ?? 2_000,
        ...options.consumer,
        connection: own,
        stream,
        consumer: durable,
        deadLetterSubject,
        handler: consumer,
        ...(consumerOptions.concurrency !== undefined ? { concurrency: consumerOptions.concurrency } : {}),
        ...(consumerOptions.closeTimeoutMs !== undefined
          ? { closeTimeoutMs: consumerOptions.closeTimeoutMs }
          : {}),
      });
      await transport.start();
      running.push({ consumer: transport, connection: own });
      return transport;
    },

    oversizedDeadLetter(id: string): HarnessMessage {
      // Fits the source stream (headers under NATS's 64 KiB header limit, the whole under its 1 MiB max_payload);
      // its full and compact dead letters, which keep the original headers and body, are over the DLQ stream's
      // 64 KiB whatever the error's stack, the minimal form (no original headers) is not. (With a bare body the full
      // form fitted once the handler's stack got shorter: the check then saw no smaller form.)
      const body = JSON.stringify({ kind: 'oversized', padding: 'p'.repeat(8_000) });
      return { id, body, headers: { 'x-bulk': 'b'.repeat(60_000) } };
    },

    async publish(messages: readonly HarnessMessage[]) {
      for (const m of messages) {
        if (m.id === undefined) {
          // No id at all (missing-id checks): no msgID, no message-id header.
          await js.publish(
            subjectOf(m),
            typeof m.body === 'string' ? new TextEncoder().encode(m.body) : m.body,
            {
              ...(m.headers !== undefined ? { headers: writeHeaders(m.headers) } : {}),
            },
          );
          continue;
        }
        // Each copy of a duplicate id is its own publish: the conformance suite sends the same id three times
        // to prove the inbox, not JetStream's duplicate window, makes it apply once — so no msgID here.
        await js.publish(
          subjectOf(m),
          typeof m.body === 'string' ? new TextEncoder().encode(m.body) : m.body,
          {
            headers: writeHeaders({ ...m.headers, 'message-id': m.id }),
          },
        );
      }
    },

    async readDeadLetters(count: number, timeoutMs: number): Promise<DeadLetterEntry[]> {
      const reader = natsDeadLetterQueue({ connection, stream: deadLetterStream });
      const letters: DeadLetterEntry[] = [];
      const deadline = Date.now() + timeoutMs;
      while (letters.length < count && Date.now() < deadline) {
        for await (const taken of reader.take({ limit: count - letters.length })) {
          await taken.remove();
          letters.push({ id: taken.id, body: taken.body, headers: taken.headers, position: taken.position });
        }
        if (letters.length < count) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await reader.close();
      return letters;
    },

    async crash() {
      for (const r of running.splice(0)) {
        // The dying process's connection goes away without a flush: nothing pending is settled.
        await r.connection.close();
        crashed.push(r.consumer.stop());
      }
    },

    async dispose() {
      await Promise.allSettled([...crashed, ...running.map((r) => r.consumer.stop())]);
      await Promise.allSettled(running.splice(0).map((r) => r.connection.close()));
      const jsm = await jetstreamManager(connection);
      await jsm.streams.delete(stream).catch(() => {});
      await jsm.streams.delete(deadLetterStream).catch(() => {});
      await publisher.close();
      await connection.close();
    },
  };
}
