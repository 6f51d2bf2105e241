// Runs the webhook ingress and the webhooks service against the SQS (ElasticMQ) and Postgres of
// `npm run services:up` (or SQS_ENDPOINT and DATABASE_URL), sends a few provider webhooks the way providers
// do (retried, out of order, one malformed), prints what was stored and applied, and stops the way SIGTERM
// would. `npm run start -w @inboxkit/example-webhooks-sqs`

import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { SQSClient } from '@aws-sdk/client-sqs';
import { createQueues } from '@inboxkit/sqs';
import { OutcomeRecorder } from '@inboxkit/testing';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

import { signWebhook, SIGNATURE_HEADER, startWebhookIngress } from './webhook-ingress.js';
import type { WebhooksDatabase } from './webhooks-consumer.js';
import { startWebhooksService } from './webhooks-service.js';

function setting(name: string, fallback?: string): string {
  const file = fileURLToPath(new URL('../../../.services/env', import.meta.url));
  const fromFile = existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .map((line) => /^([A-Z_]+)=(.*)$/.exec(line.trim()))
        .find((m) => m?.[1] === name)?.[2]
    : undefined;
  const value = process.env[name] ?? fromFile ?? fallback;
  if (value === undefined || value === '') {
    console.error(`${name} is not set: start the services with \`npm run services:up\`, or set ${name}`);
    process.exit(1);
  }
  return value;
}

process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';
const SCHEMA = 'webhooks_example';
const SECRET = 'whsec_example';

const pool = new pg.Pool({ connectionString: setting('DATABASE_URL'), options: `-c search_path=${SCHEMA}` });
// An idle pooled connection whose backend goes away (a Postgres restart) is reported here; without a listener
// Node exits. The pool drops the connection and opens a new one on the next checkout.
pool.on('error', (error) => console.warn(`postgres: idle connection lost: ${error.message}`));
await pool.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
const db = new Kysely<WebhooksDatabase>({ dialect: new PostgresDialect({ pool }) });
const client = new SQSClient({
  endpoint: setting('SQS_ENDPOINT'),
  region: setting('SQS_REGION', 'us-east-1'),
  credentials: { accessKeyId: 'example', secretAccessKey: 'example' },
});
const { queueUrl, deadLetterQueueUrl } = await createQueues({
  client,
  name: 'webhooks-example',
  maxAttempts: 5,
});
const recorder = new OutcomeRecorder();
const service = await startWebhooksService({
  db,
  inboxSchema: SCHEMA,
  client,
  queueUrl,
  deadLetterQueueUrl,
  waitTimeSeconds: 1,
  onOutcome: recorder.hook,
});
const ingress = await startWebhookIngress({ client, queueUrl, secret: SECRET });

let stopped = false;
async function shutdown(): Promise<void> {
  if (stopped) return;
  stopped = true;
  await ingress.close();
  await service.stop(); // running handlers finish and their messages are deleted
  client.destroy();
  await db.destroy();
}
process.once('SIGTERM', () => void shutdown());
process.once('SIGINT', () => void shutdown());

// The provider's webhooks for one invoice: created, then paid. The provider retries `paid` (our first 202 was
// "lost"), and `created` arrives last, out of order. One event comes without an id.
const run = randomBytes(3).toString('hex');
const now = Math.floor(Date.now() / 1000);
const invoice = (status: string) => ({
  object: { id: `in_${run}`, customer: 'cus_42', amount_due: 4_900, status },
});
const created = { id: `evt_${run}_1`, type: 'invoice.created', created: now - 60, data: invoice('open') };
const paid = { id: `evt_${run}_2`, type: 'invoice.paid', created: now, data: invoice('paid') };
const noId = { type: 'invoice.paid', created: now, data: invoice('paid') };
const deliveries = [paid, paid, created, paid, noId];
for (const event of deliveries) {
  const body = JSON.stringify(event);
  const res = await fetch(ingress.url, {
    method: 'POST',
    body,
    headers: { [SIGNATURE_HEADER]: signWebhook(SECRET, body) },
  });
  if (res.status !== 202) throw new Error(`ingress answered ${res.status}`);
}
await recorder.waitForCount(deliveries.length, {
  status: ['processed', 'duplicate', 'dead-letter'],
  timeoutMs: 30_000,
});

console.log(
  `posted ${deliveries.length} webhooks: ${paid.id} three times, ${created.id} last, one without an id\n`,
);
for (const e of recorder.events) {
  const o = e.outcome;
  const detail = o.status === 'duplicate' || o.status === 'dead-letter' ? ` (${o.reason})` : '';
  console.log(
    `  ${(e.id ?? '(no id)').padEnd(16)} ${`${o.status}${detail}`.padEnd(24)} SQS MessageId ${e.message.source.brokerMessageId?.slice(0, 8)}…`,
  );
}
const stored = await db
  .selectFrom('webhook_events')
  .select(['event_id', 'type'])
  .where('event_id', 'like', `evt_${run}_%`)
  .orderBy('event_id')
  .execute();
const row = await db
  .selectFrom('invoices')
  .selectAll()
  .where('invoice_id', '=', `in_${run}`)
  .executeTakeFirst();
console.log(`\nstored events: ${stored.map((s) => `${s.event_id} ${s.type}`).join(', ')}`);
console.log(`invoice in_${run}: ${row?.status} (the late invoice.created did not undo invoice.paid)`);
console.log(
  `dead letters: npx inboxkit dlq list --transport sqs --from webhooks-example-dlq --schema ${SCHEMA}`,
);
await shutdown();
