// The payments reconciler against real Postgres and the fake provider over HTTP: a charge the provider made
// that no payment row records (the consumer died between the charge and its commit) is found and recorded; a
// second charge of a recorded payment (a double charge) stays open on the gauge for a refund by hand; and the
// consumer's later completion of a payment the reconciler recorded is not a failure.

import { randomUUID } from 'node:crypto';

import { migrateReconciliation } from '@inboxkit/core/patterns';
import { Kysely, PostgresDialect } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createTestSchema } from '../../../test/support/services.js';
import type { TestSchema } from '../../../test/support/services.js';
import { startFakePaymentProvider } from '../src/payment-provider.js';
import type { FakePaymentProvider } from '../src/payment-provider.js';
import { createPaymentsTable } from '../src/payments-consumer.js';
import type { PaymentsDatabase } from '../src/payments-consumer.js';
import { paymentsReconciler } from '../src/payments-reconciler.js';

let schema: TestSchema;
let db: Kysely<PaymentsDatabase>;
let provider: FakePaymentProvider;

beforeAll(async () => {
  schema = await createTestSchema('payments_reconciler');
  db = new Kysely<PaymentsDatabase>({ dialect: new PostgresDialect({ pool: schema.pool }) });
  await createPaymentsTable(db);
  await migrateReconciliation(db, { schema: schema.schema });
  provider = await startFakePaymentProvider();
});

afterAll(async () => {
  await provider?.close();
  await schema?.cleanup();
});

/** The provider's clock reading of the latest charge made by `charge`. */
let lastChargeAt = 0;

/** Charges at the provider as the consumer would, with a key; returns the charge id. */
async function charge(paymentId: string, amountCents: number, key = randomUUID()): Promise<string> {
  const response = await fetch(`${provider.url}/v1/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ paymentId, amountCents, currency: 'EUR', card: 'tok_visa' }),
  });
  const made = (await response.json()) as { id: string; created: number };
  lastChargeAt = Math.max(lastChargeAt, made.created);
  return made.id;
}

/**
 * Waits until the clock has passed the latest charge's millisecond. A sweep lists [watermark, now − settleMs):
 * with settleMs 0, a charge made in the very millisecond of the sweep belongs to the next sweep (as it should),
 * so a test that expects this sweep to see it must let that millisecond end first.
 */
async function afterLastCharge(): Promise<void> {
  while (Date.now() <= lastChargeAt) await new Promise((resolve) => setTimeout(resolve, 1));
}

async function record(paymentId: string, chargeId: string, amountCents: number): Promise<void> {
  await db
    .insertInto('payments')
    .values({
      payment_id: paymentId,
      provider_charge_id: chargeId,
      amount_cents: amountCents,
      currency: 'EUR',
      charged_at: new Date(),
    })
    .execute();
}

describe('payments reconciler', () => {
  it('records an orphan charge and keeps a double charge open until it is resolved', async () => {
    // Recorded normally.
    await record('pay-ok', await charge('pay-ok', 1_000), 1_000);
    // Charged, then the process died before its payment row committed.
    const orphan = await charge('pay-orphan', 2_500);
    // Charged twice (a retry without the key after the provider forgot it): the first is recorded.
    await record('pay-twice', await charge('pay-twice', 700), 700);
    const second = await charge('pay-twice', 700);

    const reconciler = paymentsReconciler({
      db,
      providerUrl: provider.url,
      schema: schema.schema,
      settleMs: 0,
    });
    await afterLastCharge();
    const report = await reconciler.sweep();
    expect(report.listed).toBe(4);
    expect(report.repaired).toBe(1);
    expect(report.differences.map((d) => [d.kind, d.operation.key])).toEqual([['missing-local', second]]);
    expect(report.unreconciled).toBe(1);
    const orphanRow = await db
      .selectFrom('payments')
      .selectAll()
      .where('payment_id', '=', 'pay-orphan')
      .executeTakeFirst();
    expect(orphanRow).toMatchObject({ provider_charge_id: orphan, amount_cents: 2_500 });

    // The next sweep still counts the double charge, until an operator refunds it and says so.
    expect((await reconciler.sweep()).unreconciled).toBe(1);
    expect(await reconciler.resolve(second, 'refunded')).toBe(true);
    expect((await reconciler.sweep()).unreconciled).toBe(0);
  });

  it('only reports with repair: false', async () => {
    const orphan = await charge('pay-report-only', 300);
    const reconciler = paymentsReconciler({
      db,
      providerUrl: provider.url,
      schema: schema.schema,
      settleMs: 0,
      repair: false,
    });
    await afterLastCharge();
    const report = await reconciler.sweep();
    expect(report.differences.map((d) => d.operation.key)).toContain(orphan);
    expect(
      await db
        .selectFrom('payments')
        .select('payment_id')
        .where('payment_id', '=', 'pay-report-only')
        .executeTakeFirst(),
    ).toBeUndefined();
  });
});
