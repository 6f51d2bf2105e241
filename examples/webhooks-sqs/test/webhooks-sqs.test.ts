// The webhooks service against real SQS (ElasticMQ) and Postgres, fed through the real ingress: a webhook the
// provider retries is stored and applied once although each retry is a new SQS message; out-of-order events
// do not undo a newer state; an event without an id is dead-lettered with its body; a forged signature never
// reaches the queue; and assertIdempotentHandler.

import { DeleteQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { DeadLetterEntry } from '@inboxkit/core';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { createQueues, sqsDeadLetterQueue } from '@inboxkit/sqs';
import type { CreatedQueues } from '@inboxkit/sqs';
import { OutcomeRecorder, assertIdempotentHandler, uniqueName } from '@inboxkit/testing';
import { Kysely, PostgresDialect } from 'kysely';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { createTestSchema, requireService } from '../../../test/support/services.js';
import type { TestSchema } from '../../../test/support/services.js';
import { signWebhook, SIGNATURE_HEADER, startWebhookIngress } from '../src/webhook-ingress.js';
import type { WebhookIngress } from '../src/webhook-ingress.js';
import { createWebhookTables, webhooksConsumer } from '../src/webhooks-consumer.js';
import type { WebhooksDatabase } from '../src/webhooks-consumer.js';
import { startWebhooksService } from '../src/webhooks-service.js';
import type { WebhooksService } from '../src/webhooks-service.js';

const SECRET = 'whsec_test';
const FINAL = ['processed', 'duplicate', 'dead-letter'] as const;

let schema: TestSchema;
let db: Kysely<WebhooksDatabase>;
let client: SQSClient;

beforeAll(async () => {
  const sqs = requireService('sqs');
  client = new SQSClient({ endpoint: sqs.endpoint, region: sqs.region, credentials: sqs.credentials });
  schema = await createTestSchema('webhooks_sqs');
  db = new Kysely<WebhooksDatabase>({ dialect: new PostgresDialect({ pool: schema.pool }) });
  await migrateInbox(db, { schema: schema.schema });
  await createWebhookTables(db);
});

afterAll(async () => {
  client?.destroy();
  await schema?.cleanup();
});

let queues: CreatedQueues;
let recorder: OutcomeRecorder;
/** Events the version guard refused (older than their invoice). */
let stale: { eventId: string; invoiceId: string }[];
let service: WebhooksService;
let ingress: WebhookIngress;

beforeEach(async () => {
  queues = await createQueues({ client, name: uniqueName('webhooks'), maxAttempts: 5 });
  recorder = new OutcomeRecorder();
  stale = [];
  service = await startWebhooksService({
    db,
    inboxSchema: schema.schema,
    client,
    ...queues,
    waitTimeSeconds: 1,
    onOutcome: recorder.hook,
    consumer: { onStale: (event) => stale.push(event) },
  });
  ingress = await startWebhookIngress({ client, queueUrl: queues.queueUrl, secret: SECRET });
});

afterEach(async () => {
  await ingress?.close();
  await service?.stop();
  for (const url of [queues.queueUrl, queues.deadLetterQueueUrl])
    await client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
});

/** POSTs a webhook the way the provider does: the raw JSON, signed. */
async function post(event: unknown, secret = SECRET): Promise<number> {
  const body = JSON.stringify(event);
  const res = await fetch(ingress.url, {
    method: 'POST',
    body,
    headers: { [SIGNATURE_HEADER]: signWebhook(secret, body) },
  });
  return res.status;
}

function invoiceEvent(id: string, type: string, invoiceId: string, status: string, created: number) {
  return {
    id,
    type,
    created,
    data: { object: { id: invoiceId, customer: 'cus_1', amount_due: 1_500, status } },
  };
}

async function storedEvents(ids: readonly string[]) {
  return db
    .selectFrom('webhook_events')
    .select(['event_id', 'sqs_message_id'])
    .where('event_id', 'in', ids)
    .execute();
}

describe('provider webhooks through SQS, persist-first', () => {
  it('stores and applies a webhook the provider sent three times once, although each is a new SQS message', async () => {
    const id = uniqueName('evt');
    const invoiceId = uniqueName('in');
    const event = invoiceEvent(id, 'invoice.paid', invoiceId, 'paid', 1_750_000_000);
    for (let i = 0; i < 3; i++) expect(await post(event)).toBe(202);
    await recorder.waitForCount(3, { id, status: [...FINAL], timeoutMs: 30_000 });

    const outcomes = recorder.outcomes(id);
    expect(outcomes.map((o) => o.status).sort()).toEqual(['duplicate', 'duplicate', 'processed']);
    // Three different SQS MessageIds, one event id: only the provider's id catches the retry.
    expect(
      new Set(recorder.events.filter((e) => e.id === id).map((e) => e.message.source.brokerMessageId)).size,
    ).toBe(3);
    expect(await storedEvents([id])).toHaveLength(1);
    const invoice = await db
      .selectFrom('invoices')
      .selectAll()
      .where('invoice_id', '=', invoiceId)
      .executeTakeFirstOrThrow();
    expect(invoice).toMatchObject({ status: 'paid', amount_cents: 1_500 });
  }, 60_000);

  it('keeps every event but lets a late, older one change nothing', async () => {
    const invoiceId = uniqueName('in');
    const created = invoiceEvent(uniqueName('evt'), 'invoice.created', invoiceId, 'open', 1_750_000_000);
    const paid = invoiceEvent(uniqueName('evt'), 'invoice.paid', invoiceId, 'paid', 1_750_000_060);
    expect(await post(paid)).toBe(202);
    await recorder.waitFor(paid.id, 'processed', { timeoutMs: 30_000 });
    expect(await post(created)).toBe(202);
    await recorder.waitFor(created.id, 'processed', { timeoutMs: 30_000 });

    expect(await storedEvents([created.id, paid.id])).toHaveLength(2);
    const invoice = await db
      .selectFrom('invoices')
      .selectAll()
      .where('invoice_id', '=', invoiceId)
      .executeTakeFirstOrThrow();
    expect(invoice.status).toBe('paid');
    // Refused by the version guard, and said so.
    expect(stale).toEqual([{ eventId: created.id, invoiceId }]);
  }, 60_000);

  it('dead-letters an event without an id as missing-id, body and all', async () => {
    const event = {
      type: 'invoice.paid',
      created: 1_750_000_000,
      data: { object: { marker: uniqueName('no-id') } },
    };
    expect(await post(event)).toBe(202);
    await recorder.waitFor(undefined, 'dead-letter', { timeoutMs: 30_000 });
    await service.stop(); // settles: the DLQ copy is confirmed before the source message is deleted
    const reader = sqsDeadLetterQueue({ client, queueUrl: queues.deadLetterQueueUrl, waitTimeSeconds: 1 });
    const letters: DeadLetterEntry[] = [];
    for await (const entry of reader.browse({ limit: 10 })) letters.push(entry);
    await reader.close();
    expect(letters).toHaveLength(1);
    expect(letters[0]!.headers['x-inboxkit-reason']).toBe('missing-id');
    expect(JSON.parse(String(letters[0]!.body))).toEqual(event);
  }, 60_000);

  it('refuses a forged signature at the ingress: nothing reaches the queue', async () => {
    expect(
      await post(invoiceEvent(uniqueName('evt'), 'invoice.paid', 'in_x', 'paid', 1), 'not-the-secret'),
    ).toBe(401);
    const { Attributes } = await client.send(
      new GetQueueAttributesCommand({
        QueueUrl: queues.queueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    expect(
      Number(Attributes?.ApproximateNumberOfMessages) +
        Number(Attributes?.ApproximateNumberOfMessagesNotVisible),
    ).toBe(0);
    expect(recorder.events).toHaveLength(0);
  });

  it('passes assertIdempotentHandler: one stored event per message, however it is delivered', async () => {
    const consumer = webhooksConsumer({
      store: new PostgresInboxStore<WebhooksDatabase>({ db, schema: schema.schema }),
    });
    const report = await assertIdempotentHandler(
      consumer,
      ({ id }) => ({
        id,
        body: JSON.stringify(invoiceEvent(id, 'invoice.paid', `in-${id}`, 'paid', 1_750_000_000)),
      }),
      { countEffects: async ({ id }) => (await storedEvents([id])).length },
    );
    expect(report.passed).toBe(true);
  }, 60_000);
});
