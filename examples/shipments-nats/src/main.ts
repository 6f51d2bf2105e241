// `npm run start -w @inboxkit/example-shipments-nats`: creates the streams SHIPMENTS / SHIPMENTS_DLQ, publishes
// shipment events — one re-sent by its producer after the duplicate window would have forgotten it (no msgID on
// the second send, as a producer that restarted would), one with no id, one invalid — consumes them once and
// prints what happened.

import { randomBytes } from 'node:crypto';

import { migrateInbox } from '@inboxkit/core/postgres';
import { ensureStreams, natsConsumer, natsDeadLetterQueue, natsPublisher } from '@inboxkit/nats';
import { OutcomeRecorder } from '@inboxkit/testing';
import { jetstream } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

import { createShipmentTables, shipmentsConsumer } from './shipments-consumer.js';
import type { ShipmentsDatabase } from './shipments-consumer.js';

const SCHEMA = 'shipments_example';
const run = randomBytes(3).toString('hex');
const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL,
  options: `-c search_path=${SCHEMA},public`,
});
const db = new Kysely<ShipmentsDatabase>({ dialect: new PostgresDialect({ pool }) });
await pool.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
await migrateInbox(db, { schema: SCHEMA });
await createShipmentTables(db);

const nc = await connect({ servers: process.env.NATS_URL });
await ensureStreams({
  connection: nc,
  stream: 'SHIPMENTS',
  subjects: ['shipments.>'],
  deadLetterStream: 'SHIPMENTS_DLQ',
  deadLetterSubject: 'dlq.shipments',
});
const recorder = new OutcomeRecorder();
const consumer = natsConsumer({
  connection: nc,
  stream: 'SHIPMENTS',
  consumer: 'shipments-inbox',
  deadLetterSubject: 'dlq.shipments',
  handler: shipmentsConsumer(db, SCHEMA, recorder.hook),
});
await consumer.start();

const shipment = `shp_${run}`;
const event = (status: string) => JSON.stringify({ shipment, status });
const publisher = natsPublisher({ connection: nc });
await publisher.publish([
  { destination: `shipments.${shipment}`, id: `evt_${run}_1`, body: event('label-created') },
]);
await publisher.publish([
  { destination: `shipments.${shipment}`, id: `evt_${run}_2`, body: event('picked-up') },
]);
// The producer restarted and sends evt 2 again, as a plain NATS client would, without msgID: JetStream stores it.
const js = jetstream(nc);
const again = headers();
again.set('message-id', `evt_${run}_2`);
await js.publish(`shipments.${shipment}`, event('picked-up'), { headers: again });
await js.publish(`shipments.${shipment}`, event('delivered')); // no id at all
await publisher.publish([
  { destination: `shipments.${shipment}`, id: `evt_${run}_3`, body: '{"shipment":1}' },
]);

await recorder.waitForCount(5, { status: ['processed', 'duplicate', 'dead-letter'], timeoutMs: 60_000 });
await consumer.stop();
for (const e of recorder.events) {
  const o = e.outcome;
  const detail = o.status === 'duplicate' || o.status === 'dead-letter' ? ` (${o.reason})` : '';
  console.log(
    `  ${(e.id ?? '(no id)').padEnd(18)} ${o.status}${detail}   stream seq ${e.message.source.offset}`,
  );
}
const row = await db.selectFrom('shipments').selectAll().where('id', '=', shipment).executeTakeFirst();
console.log(
  `\nshipment ${shipment}: ${row?.status}, ${row?.events} events applied (3 sends of 2 ids: applied once each)`,
);
let dead = 0;
for await (const entry of natsDeadLetterQueue({ connection: nc, stream: 'SHIPMENTS_DLQ' }).browse({
  limit: 1000,
}))
  if (entry.headers['x-inboxkit-source-destination'] === `shipments.${shipment}`) dead++;
console.log(`dead letters of this run in SHIPMENTS_DLQ: ${dead} (missing-id, schema-invalid)`);
await nc.close();
await db.destroy();
