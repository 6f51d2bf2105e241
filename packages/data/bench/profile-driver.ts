// Drives one adapter's first deliveries (or its library alone, for comparison) at concurrency 16 and writes a
// CPU profile of the driven part only (after start-up and a warm-up), for Chrome DevTools or speedscope:
//   node --conditions=@inboxkit/source --import tsx packages/data/bench/profile-driver.ts pg [inbox|alone] [n] [out.cpuprofile]
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { idempotentConsumer } from '@inboxkit/core';
import { migrateInbox } from '@inboxkit/core/postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { setting } from '../../../bench/settings.js';
import { openAdapter, type AdapterName } from '../test/fixtures/adapters.js';

const [name = 'pg', side = 'inbox', count = '20000', out] = process.argv.slice(2);
const url = setting('DATABASE_URL');
const admin = new pg.Pool({ connectionString: url, max: 1 });
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: admin }) });
const schema = `profile_${Date.now()}`;
await sql.raw(`CREATE SCHEMA "${schema}"`).execute(db);
await migrateInbox(db, { schema });
await admin.query(
  `CREATE TABLE "${schema}".effects (seq bigserial PRIMARY KEY, consumer text NOT NULL, message_id text NOT NULL)`,
);
const adapter = await openAdapter(name as AdapterName, { url, schema, poolSize: 16 });
const consumer = idempotentConsumer<unknown, object>({
  name: `profile-${name}`,
  store: adapter.store,
  handler: async (message, { tx }) => adapter.applyEffect(tx, `profile-${name}`, message.id),
});
const task =
  side === 'alone'
    ? () => adapter.transaction((tx) => adapter.applyEffect(tx, 'alone', 'x'))
    : () => consumer.handle({ id: randomUUID(), body: '{}', headers: {}, source: { transport: 'bench' } });
for (let i = 0; i < 500; i++) await task(); // warm-up: connections, statements, JIT
const session = new Session();
if (out !== undefined) {
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
}
let next = 0;
const n = Number(count);
const t0 = performance.now();
const cpu0 = process.cpuUsage();
await Promise.all(
  Array.from({ length: 16 }, async () => {
    while (next++ < n) await task();
  }),
);
const cpu = process.cpuUsage(cpu0);
if (out !== undefined) {
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(out, JSON.stringify(profile));
  session.disconnect();
}
console.log(
  `${name} ${side}: ${(n / ((performance.now() - t0) / 1000)).toFixed(0)}/s, Node ${((cpu.user + cpu.system) / n).toFixed(0)} µs/delivery`,
);
await adapter.close();
await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
await db.destroy();
