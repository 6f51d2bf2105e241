// The replay suite's NATS (JetStream): a stream and its DLQ stream made by the transport's ensureStreams, a
// natsConsumer feeding the core consumer. The DLQ is read in place (by sequence), so browsing moves nothing.

import type { DeadLetterEntry, IdempotentConsumer, TransportConsumer } from '@inboxkit/core';
import { ensureStreams, natsConsumer, natsDeadLetterQueue, natsPublisher } from '@inboxkit/nats';
import { uniqueName } from '@inboxkit/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';

import type { ReplayFixture } from './replay-fixture.js';
import { requireService } from './services.js';

/** A fresh stream pair on the test NATS server. */
export async function natsFixture(): Promise<ReplayFixture> {
  const url = requireService('NATS_URL');
  const nc = await connect({ servers: url });
  const base = uniqueName('cli-nats').replace(/[^a-zA-Z0-9]/g, '_');
  const stream = `S_${base}`;
  const subject = `cli.${base}`;
  const deadLetterStream = `DLQ_${base}`;
  const deadLetterSubject = `cli-dlq.${base}`;
  await ensureStreams({ connection: nc, stream, subjects: [subject], deadLetterStream, deadLetterSubject });
  const publisher = natsPublisher({ connection: nc });
  const jsm = await jetstreamManager(nc);
  let consumer: TransportConsumer | undefined;

  return {
    transport: 'nats',
    dlq: deadLetterStream,
    cliArgs: ['--nats-url', url],
    async start(handler: IdempotentConsumer<unknown, unknown>) {
      consumer = natsConsumer({
        connection: nc,
        stream,
        consumer: `c_${base}`,
        deadLetterSubject,
        handler,
        concurrency: 4,
      });
      await consumer.start();
    },
    async stop() {
      await consumer?.stop();
      consumer = undefined;
    },
    async publish(messages) {
      await publisher.publish(messages.map((m) => ({ destination: subject, id: m.id, body: m.body })));
    },
    async deadLetters() {
      const out: DeadLetterEntry[] = [];
      for await (const entry of natsDeadLetterQueue({ connection: nc, stream: deadLetterStream }).browse({
        limit: 100_000,
      }))
        out.push(entry);
      return out;
    },
    async restore(entries) {
      // Copies as read, without msgID: two copies of one id must both be stored.
      const js = jetstream(nc);
      for (const e of entries) {
        const h = headers();
        for (const [k, v] of Object.entries(e.headers)) h.set(k, v);
        const body =
          typeof e.body === 'string' ? new TextEncoder().encode(e.body) : (e.body ?? new Uint8Array());
        await js.publish(deadLetterSubject, body, { headers: h });
      }
    },
    async dlqDepth() {
      return (await jsm.streams.info(deadLetterStream)).state.messages;
    },
    async sourceState() {
      const s = (await jsm.streams.info(stream)).state;
      return `messages=${s.messages} last=${s.last_seq}`;
    },
    async dispose() {
      await consumer?.stop().catch(() => undefined);
      await jsm.streams.delete(stream).catch(() => undefined);
      await jsm.streams.delete(deadLetterStream).catch(() => undefined);
      await nc.close();
    },
  };
}
