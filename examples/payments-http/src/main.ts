// Runs the payments API against the Postgres of `npm run services:up` (or DATABASE_URL), sends it the usual
// trouble through idempotentFetch, prints what the customer saw and what the card processor did, and stops.
// `npm run start -w @inboxkit/example-payments-http`

import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { idempotentFetch } from '@inboxkit/http/client';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

import { DECLINED_CARD, startFakeCardProcessor } from './payment-provider.js';
import { startPaymentsApi } from './payments-api.js';
import type { PaymentsDatabase } from './payments-api.js';

function setting(name: string): string {
  const file = fileURLToPath(new URL('../../../.services/env', import.meta.url));
  const fromFile = existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .map((line) => /^([A-Z_]+)=(.*)$/.exec(line.trim()))
        .find((m) => m?.[1] === name)?.[2]
    : undefined;
  const value = process.env[name] ?? fromFile;
  if (value === undefined || value === '') {
    console.error(`${name} is not set: start the services with \`npm run services:up\`, or set ${name}`);
    process.exit(1);
  }
  return value;
}

const SCHEMA = 'payments_http_example';

const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), options: `-c search_path=${SCHEMA}` });
// An idle pooled connection whose backend goes away (a Postgres restart) is reported here; without a listener
// Node exits. The pool drops the connection and opens a new one on the next checkout.
pool.on('error', (error) => console.warn(`postgres: idle connection lost: ${error.message}`));
await pool.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
const db = new Kysely<PaymentsDatabase>({ dialect: new PostgresDialect({ pool }) });
const processor = await startFakeCardProcessor();
const api = await startPaymentsApi({
  db,
  keySchema: SCHEMA,
  processorUrl: processor.url,
  apiKeys: { sk_test_alice: 'alice' },
});

let stopped = false;
async function shutdown(): Promise<void> {
  if (stopped) return;
  stopped = true;
  await api.stop(); // requests in flight finish first
  await processor.close();
  await db.destroy();
}
process.once('SIGTERM', () => void shutdown());
process.once('SIGINT', () => void shutdown());

const run = randomBytes(3).toString('hex');
const headers = { authorization: 'Bearer sk_test_alice', 'content-type': 'application/json' };
const body = (n: number, card = 'tok_visa') =>
  JSON.stringify({ amountCents: n * 1_000, currency: 'EUR', card, description: `order ${run}-${n}` });
const post = (payload: string, key: string, log: string[]) =>
  idempotentFetch(
    `${api.url}/payments`,
    { method: 'POST', headers, body: payload },
    {
      key,
      baseDelayMs: 200,
      onRetry: ({ reason, delayMs }) => log.push(`retry after ${reason} (${delayMs} ms)`),
    },
  );

async function describe(response: Response, log: string[]): Promise<string> {
  const payment = (await response.json()) as { id?: string; status?: string; title?: string };
  const replayed = response.headers.get('idempotent-replayed') === 'true' ? ' (replayed)' : '';
  const what =
    payment.id !== undefined ? `payment ${payment.id.slice(0, 8)} ${payment.status}` : payment.title;
  return [...log, `${response.status}${replayed} ${what}`].join(' → ');
}

// 1. A double click: the checkout page minted one key for the intent, both clicks send it.
const intent = randomUUID();
const logs: [string[], string[]] = [[], []];
const clicks = await Promise.all([post(body(1), intent, logs[0]), post(body(1), intent, logs[1])]);
console.log(`double click, click 1:     ${await describe(clicks[0], logs[0])}`);
console.log(`double click, click 2:     ${await describe(clicks[1], logs[1])}`);

// 2. The processor charges, then answers 503: the API answers 502 and releases the key; the client retries with
//    the same key, the API resumes after its recovery point and asks the processor again with the same key.
processor.failAfterCharge();
const lost: string[] = [];
console.log(`charged, answer lost:      ${await describe(await post(body(2), randomUUID(), lost), lost)}`);

// 3. The same key with another amount: refused.
const reused: string[] = [];
const changed = body(1).replace('"amountCents":1000', '"amountCents":9000');
console.log(`same key, other amount:    ${await describe(await post(changed, intent, reused), reused)}`);

// 4. A declined card is a final answer: stored and replayed, never retried by the client.
const declinedKey = randomUUID();
const d1: string[] = [];
const d2: string[] = [];
console.log(
  `declined card:             ${await describe(await post(body(3, DECLINED_CARD), declinedKey, d1), d1)}`,
);
console.log(
  `declined card, sent again: ${await describe(await post(body(3, DECLINED_CARD), declinedKey, d2), d2)}`,
);

const rows = await db
  .selectFrom('payments')
  .select(['id', 'description', 'status'])
  .where('description', 'like', `order ${run}-%`)
  .orderBy('description')
  .execute();
console.log('');
for (const row of rows) {
  const requests = processor.requests().filter((r) => r.reference === row.id);
  console.log(
    `${row.description}  ${row.status.padEnd(9)}  processor: ${requests.length} request(s), ${new Set(requests.map((r) => r.idempotencyKey)).size} key, ${processor.chargesFor(row.id)} charge(s)`,
  );
}
console.log(`\nprune expired keys from cron: npx inboxkit prune --http --schema ${SCHEMA}`);
await shutdown();
