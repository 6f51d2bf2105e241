// The outbox against real NATS JetStream and Postgres: the relay publishes each committed row with natsPublisher
// (msgID = the row's id, the stream's acknowledgement awaited), a re-publish of the same rows within the duplicate
// window stores nothing more, and a natsConsumer over the Postgres inbox applies each id once.

import { idempotentConsumer } from '@inboxkit/core';
import type { TransportConsumer } from '@inboxkit/core';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { ensureStreams, natsConsumer, natsPublisher } from '@inboxkit/nats';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { requireService, uniqueTestName } from '../../../test/support/services.js';
import { enqueue, startOutboxRelay } from '../src/index.js';
import { openOutboxDb, waitFor, type OutboxTestDb } from './support.js';

describe('outbox relay on NATS JetStream', () => {
  let t: OutboxTestDb;
  let nc: NatsConnection;
  let consumer: TransportConsumer | undefined;
  const base = uniqueTestName('outbox').replace(/-/g, '_');
  const names = {
    stream: `OUTBOX_${base}`,
    subjects: [`outbox.${base}`],
    deadLetterStream: `OUTBOX_${base}_DLQ`,
    deadLetterSubject: `outbox-dlq.${base}`,
  };

  beforeAll(async () => {
    t = await openOutboxDb('outbox_nats');
    await migrateInbox(t.db, { schema: t.schema.schema });
    await sql`CREATE TABLE ${sql.raw(`"${t.schema.schema}"."effects"`)} (message_id text NOT NULL)`.execute(
      t.db,
    );
    nc = await connect({ servers: requireService('nats').url });
    await ensureStreams({ connection: nc, ...names });
  });
  afterAll(async () => {
    await consumer?.stop();
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(names.stream).catch(() => undefined);
    await jsm.streams.delete(names.deadLetterStream).catch(() => undefined);
    await nc.close();
    await t?.close();
  });

  it('relays every committed row once into the stream, and the consumer applies each id once', async () => {
    const schema = t.schema.schema;
    const ids: string[] = [];
    await t.db.transaction().execute(async (tx) => {
      for (let i = 0; i < 30; i++)
        ids.push(
          await enqueue(
            tx,
            { publisher: 'nats', destination: names.subjects[0]!, body: JSON.stringify({ i }) },
            { schema },
          ),
        );
    });
    const publisher = natsPublisher({ connection: nc });
    const relay = startOutboxRelay({ db: t.db, publishers: { nats: publisher }, schema, pollIntervalMs: 10 });
    await waitFor(async () => (await t.backlog()) === 0, 60_000);
    await relay.stop();
    const jsm = await jetstreamManager(nc);
    expect((await jsm.streams.info(names.stream)).state.messages).toBe(30);

    // A relay that lost the acknowledgements sends the same rows again: the duplicate window stores nothing more.
    await publisher.publish(
      ids.map((id, i) => ({ destination: names.subjects[0]!, id, body: JSON.stringify({ i }) })),
    );
    expect((await jsm.streams.info(names.stream)).state.messages).toBe(30);

    consumer = natsConsumer({
      connection: nc,
      stream: names.stream,
      consumer: 'sink',
      deadLetterSubject: names.deadLetterSubject,
      handler: idempotentConsumer<{ i: number }, Transaction<unknown>>({
        name: 'nats-sink',
        store: new PostgresInboxStore({ db: t.db, schema }),
        handler: async (message, context) => {
          await sql`INSERT INTO ${sql.raw(`"${schema}"."effects"`)} VALUES (${message.id})`.execute(
            context.tx,
          );
        },
      }),
    });
    await consumer.start();
    const effects = async () =>
      (
        await sql<{
          n: string;
          total: string;
        }>`SELECT count(DISTINCT message_id) AS n, count(*) AS total FROM ${sql.raw(`"${schema}"."effects"`)}`.execute(
          t.db,
        )
      ).rows[0]!;
    await waitFor(async () => (await effects()).total === '30', 60_000);
    expect(await effects()).toMatchObject({ n: '30', total: '30' });
    const { rows } = await sql<{
      id: string;
    }>`SELECT message_id AS id FROM ${sql.raw(`"${schema}"."effects"`)}`.execute(t.db);
    expect(rows.map((r) => r.id).sort()).toEqual([...ids].sort());
  });
});
