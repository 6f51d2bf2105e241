// The payments API against real Postgres, over real HTTP: a double click charges once, 20 parallel requests
// with one key charge once, a changed body under the same key is refused (422), a processor failure after the
// charge resumes from the recovery point without charging again, and customers' keys are independent.

import { idempotentFetch } from '@inboxkit/http/client';
import { Kysely, PostgresDialect } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createTestSchema, requireService } from '../../../test/support/services.js';
import type { TestSchema } from '../../../test/support/services.js';
import { DECLINED_CARD, startFakeCardProcessor } from '../src/payment-provider.js';
import type { FakeCardProcessor } from '../src/payment-provider.js';
import { startPaymentsApi } from '../src/payments-api.js';
import type { PaymentsApi, PaymentsDatabase } from '../src/payments-api.js';

let schema: TestSchema;
let db: Kysely<PaymentsDatabase>;
let processor: FakeCardProcessor;
let api: PaymentsApi;

const ALICE = { authorization: 'Bearer sk_test_alice', 'content-type': 'application/json' };
const BOB = { authorization: 'Bearer sk_test_bob', 'content-type': 'application/json' };

beforeAll(async () => {
  requireService('postgres');
  schema = await createTestSchema('payments_http', { max: 25 });
  schema.pool.on('error', () => undefined); // an idle connection lost must not end the test process
  db = new Kysely<PaymentsDatabase>({ dialect: new PostgresDialect({ pool: schema.pool }) });
  processor = await startFakeCardProcessor();
  api = await startPaymentsApi({
    db,
    keySchema: schema.schema,
    processorUrl: processor.url,
    apiKeys: { sk_test_alice: 'alice', sk_test_bob: 'bob' },
  });
});

afterAll(async () => {
  await api?.stop();
  await processor?.close();
  await schema?.cleanup();
});

interface PaymentView {
  id: string;
  status: string;
  amountCents: number;
  chargeId: string | null;
}

let n = 0;
/** A payment body whose description makes its processor charges and rows findable. */
function order(amountCents = 4_200, card = 'tok_visa') {
  const description = `order-${Date.now().toString(36)}-${++n}`;
  return { description, body: JSON.stringify({ amountCents, currency: 'EUR', card, description }) };
}

async function paymentsFor(description: string) {
  return db.selectFrom('payments').selectAll().where('description', '=', description).execute();
}

/** Charges the processor made for payments with this description. */
async function chargesFor(description: string): Promise<number> {
  const rows = await paymentsFor(description);
  return rows.reduce((sum, row) => sum + processor.chargesFor(row.id), 0);
}

describe('POST /payments', () => {
  it('a double click charges once: both clicks answer the same payment, the second from the replay', async () => {
    const { description, body } = order();
    // The checkout page minted one key for this intent; both clicks send it. idempotentFetch retries the
    // click that found the first one in flight (409, Retry-After) until it gets the stored answer.
    const intent = `checkout-${description}`;
    const click = () =>
      idempotentFetch(`${api.url}/payments`, { method: 'POST', headers: ALICE, body }, { key: intent });
    const [first, second] = await Promise.all([click(), click()]);
    expect([first.status, second.status]).toEqual([201, 201]);
    const [a, b] = [(await first.json()) as PaymentView, (await second.json()) as PaymentView];
    expect(b.id).toBe(a.id);
    expect(a).toMatchObject({ status: 'succeeded', amountCents: 4_200 });
    expect([first, second].filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(1);
    // A third click after the fact: the replay, byte for byte, with the Location header.
    const third = await click();
    expect(third.headers.get('idempotent-replayed')).toBe('true');
    expect(third.headers.get('location')).toBe(`/payments/${a.id}`);
    expect(await third.json()).toEqual(a);

    expect(await paymentsFor(description)).toHaveLength(1);
    expect(await chargesFor(description)).toBe(1);
  });

  it('20 parallel requests with one key: one payment, one charge; the rest 409 or the same answer', async () => {
    const { description, body } = order(999);
    const headers = { ...ALICE, 'idempotency-key': `parallel-${description}` };
    const send = () => fetch(`${api.url}/payments`, { method: 'POST', headers, body });
    const responses = await Promise.all(Array.from({ length: 20 }, send));
    const statuses = responses.map((r) => r.status);
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    const created = responses.filter((r) => r.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    const bodies = new Set(await Promise.all(created.map((r) => r.text())));
    expect(bodies.size).toBe(1);
    for (const r of responses.filter((r) => r.status === 409)) {
      expect(r.headers.get('retry-after')).toBe('1');
      await r.body?.cancel();
    }
    // Whoever got 409 and asks again gets the stored answer.
    const after = await send();
    expect(after.status).toBe(201);
    expect(await after.text()).toBe([...bodies][0]);

    expect(await paymentsFor(description)).toHaveLength(1);
    expect(await chargesFor(description)).toBe(1);
  });

  it('the same key with a different body is refused with 422 and changes nothing', async () => {
    const { description, body } = order(1_000);
    const key = `reuse-${description}`;
    const first = await fetch(`${api.url}/payments`, {
      method: 'POST',
      headers: { ...ALICE, 'idempotency-key': key },
      body,
    });
    expect(first.status).toBe(201);
    const changed = await fetch(`${api.url}/payments`, {
      method: 'POST',
      headers: { ...ALICE, 'idempotency-key': key },
      body: body.replace('"amountCents":1000', '"amountCents":100000'),
    });
    expect(changed.status).toBe(422);
    expect(changed.headers.get('content-type')).toBe('application/problem+json');
    expect(await changed.json()).toMatchObject({ status: 422, title: 'Idempotency-Key reused' });
    expect(await paymentsFor(description)).toHaveLength(1);
    expect(await chargesFor(description)).toBe(1);
  });

  it('a processor failure after the charge: the retry resumes at the recovery point and is not charged again', async () => {
    const { description, body } = order(2_500);
    processor.failAfterCharge();
    const retries: string[] = [];
    const response = await idempotentFetch(
      `${api.url}/payments`,
      { method: 'POST', headers: ALICE, body },
      { baseDelayMs: 10, onRetry: ({ reason }) => retries.push(reason) },
    );
    expect(retries).toEqual(['status 502']);
    expect(response.status).toBe(201);
    const payment = (await response.json()) as PaymentView;
    // One payment row (the phase ran once), two processor requests with one downstream key, one charge.
    expect(await paymentsFor(description)).toHaveLength(1);
    const requests = processor.requests().filter((r) => r.reference === payment.id);
    expect(requests.map((r) => [r.result, r.failedAfterCharge])).toEqual([
      ['charged', true],
      ['replayed', false],
    ]);
    expect(new Set(requests.map((r) => r.idempotencyKey))).toEqual(new Set([`payment-${payment.id}`]));
    expect(processor.chargesFor(payment.id)).toBe(1);
    expect(processor.charges().find((c) => c.reference === payment.id)?.id).toBe(payment.chargeId);
  });

  it('a declined card is a stored 402; another customer with the same key is another payment', async () => {
    const declined = order(500, DECLINED_CARD);
    const key = `shared-${declined.description}`;
    const send = (headers: Record<string, string>, body: string) =>
      fetch(`${api.url}/payments`, { method: 'POST', headers: { ...headers, 'idempotency-key': key }, body });
    const first = await send(ALICE, declined.body);
    expect(first.status).toBe(402);
    expect(await first.json()).toMatchObject({
      status: 'declined',
      failureMessage: 'The card was declined.',
    });
    const again = await send(ALICE, declined.body);
    expect(again.status).toBe(402);
    expect(again.headers.get('idempotent-replayed')).toBe('true');

    const bobs = order(500);
    const bob = await send(BOB, bobs.body);
    expect(bob.status).toBe(201);
    expect(bob.headers.get('idempotent-replayed')).toBeNull();
    expect(await chargesFor(declined.description)).toBe(0);
    expect(await chargesFor(bobs.description)).toBe(1);
    // Alice cannot read Bob's payment.
    const { id } = (await bob.json()) as PaymentView;
    expect((await fetch(`${api.url}/payments/${id}`, { headers: ALICE })).status).toBe(404);
    expect((await fetch(`${api.url}/payments/${id}`, { headers: BOB })).status).toBe(200);
  });

  it('refuses requests without a key (400) and without credentials (401)', async () => {
    const { body } = order();
    const noKey = await fetch(`${api.url}/payments`, { method: 'POST', headers: ALICE, body });
    expect(noKey.status).toBe(400);
    expect(await noKey.json()).toMatchObject({ title: 'Idempotency-Key missing' });
    const noAuth = await fetch(`${api.url}/payments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'k' },
      body,
    });
    expect(noAuth.status).toBe(401);
  });
});
