// The shipments service against real NATS JetStream and Postgres: an event its producer sends twice (the second
// time without msgID, as a restarted producer would, so JetStream stores both) is applied once; an event without
// an id and an invalid one are dead-lettered with their reasons; a replayed dead letter is applied once.

import { migrateInbox } from '@inboxkit/core/postgres';
import { ensureStreams, natsConsumer, natsDeadLetterQueue, natsPublisher } from '@inboxkit/nats';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { Kysely, PostgresDialect } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';

import { createTestSchema, requireService } from '../../../test/support/services.js';
import type { TestSchema } from '../../../test/support/services.js';
import { createShipmentTables, shipmentsConsumer } from '../src/shipments-consumer.js';
import type { ShipmentsDatabase } from '../src/shipments-consumer.js';

let schema: TestSchema;
let db: Kysely<ShipmentsDatabase>;
let nc: NatsConnection;
const base = uniqueName('ship').replace(/[^a-zA-Z0-9]/g, '_');
const names = {
  stream: `SHIP_${base}`,
  subjects: [`ship.${base}.>`],
  deadLetterStream: `SHIPDLQ_${base}`,
  deadLetterSubject: `shipdlq.${base}`,
};

beforeAll(async () => {
  schema = await createTestSchema('shipments_nats');
  db = new Kysely<ShipmentsDatabase>({ dialect: new PostgresDialect({ pool: schema.pool }) });
  await migrateInbox(db, { schema: schema.schema });
  await createShipmentTables(db);
  nc = await connect({ servers: requireService('nats').url });
  await ensureStreams({ connection: nc, ...names });
});

afterAll(async () => {
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(names.stream).catch(() => undefined);
  await jsm.streams.delete(names.deadLetterStream).catch(() => undefined);
  await nc.close();
  await schema.cleanup();
});

it('applies a re-sent event once and dead-letters an id-less and an invalid one with their reasons', async () => {
  const recorder = new OutcomeRecorder();
  const consumer = natsConsumer({
    connection: nc,
    stream: names.stream,
    consumer: 'shipments',
    deadLetterSubject: names.deadLetterSubject,
    handler: shipmentsConsumer(db, schema.schema, recorder.hook),
  });
  await consumer.start();
  try {
    const subject = `ship.${base}.shp_1`;
    const body = (status: string) => JSON.stringify({ shipment: 'shp_1', status });
    const publisher = natsPublisher({ connection: nc });
    await publisher.publish([{ destination: subject, id: 'e1', body: body('label-created') }]);
    await publisher.publish([{ destination: subject, id: 'e2', body: body('picked-up') }]);
    const again = headers();
    again.set('message-id', 'e2');
    await jetstream(nc).publish(subject, body('picked-up'), { headers: again });
    await jetstream(nc).publish(subject, body('delivered'));
    await publisher.publish([{ destination: subject, id: 'e3', body: '{"shipment":1}' }]);
    await recorder.waitForCount(5, { status: ['processed', 'duplicate', 'dead-letter'], timeoutMs: 60_000 });

    expect(recorder.count('processed')).toBe(2);
    expect(recorder.count('duplicate', 'e2')).toBe(1);
    const row = await db
      .selectFrom('shipments')
      .selectAll()
      .where('id', '=', 'shp_1')
      .executeTakeFirstOrThrow();
    expect(row.events).toBe(2);
    const letters: string[] = [];
    for await (const e of natsDeadLetterQueue({ connection: nc, stream: names.deadLetterStream }).browse({
      limit: 10,
    }))
      letters.push(`${e.id ?? '(none)'}:${e.headers['x-inboxkit-reason']}`);
    expect(letters.sort()).toEqual(['(none):missing-id', 'e3:schema-invalid']);
  } finally {
    await consumer.stop();
  }
});
