// The payments API: `POST /payments` charges a card once per Idempotency-Key, however often the client sends
// it. Three steps, two of them recovery points around the one call that leaves Postgres:
//
//   1. phase 'create-payment': the payment row (pending), once per key; a retry gets the same payment id back;
//   2. the processor call, keyed by that payment id, so a retry after an unknown outcome cannot charge twice;
//   3. context.transaction: the payment's final state and the stored response commit together.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

import type { Logger } from '@inboxkit/core';
import {
  idempotencyKeys,
  migrateIdempotencyKeys,
  startIdempotencyKeyPruner,
  type IdempotencyContext,
  type IdempotentResponseInit,
} from '@inboxkit/http';
import { idempotentExpressHandler } from '@inboxkit/http/express';
import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { sql } from 'kysely';
import type { Kysely, Selectable } from 'kysely';

import { chargeCard } from './card-processor-client.js';

/** The API's own table. */
export interface PaymentsDatabase {
  payments: {
    id: string;
    customer_id: string;
    amount_cents: number;
    currency: string;
    description: string | null;
    status: 'pending' | 'succeeded' | 'declined';
    processor_charge_id: string | null;
    failure_message: string | null;
    created_at: Date;
    updated_at: Date;
  };
}
type PaymentRow = Selectable<PaymentsDatabase['payments']>;

/** Creates the payments table (idempotent; a real service would put this in its own migrations). */
export async function createPaymentsTable(db: Kysely<PaymentsDatabase>): Promise<void> {
  await sql`
    CREATE TABLE IF NOT EXISTS payments (
      id uuid PRIMARY KEY,
      customer_id text NOT NULL,
      amount_cents integer NOT NULL CHECK (amount_cents > 0),
      currency text NOT NULL,
      description text,
      status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'declined')),
      processor_charge_id text,
      failure_message text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
}

/** The request body of `POST /payments`. */
export interface CreatePayment {
  readonly amountCents: number;
  readonly currency: 'EUR' | 'USD' | 'GBP';
  readonly card: string;
  readonly description?: string;
}

function parseCreatePayment(body: unknown): CreatePayment | string {
  if (typeof body !== 'object' || body === null) return 'the body must be a JSON object';
  const b = body as Record<string, unknown>;
  if (!Number.isSafeInteger(b['amountCents']) || (b['amountCents'] as number) <= 0)
    return 'amountCents must be a positive integer';
  if (!['EUR', 'USD', 'GBP'].includes(b['currency'] as string)) return 'currency must be EUR, USD or GBP';
  if (typeof b['card'] !== 'string' || b['card'] === '') return 'card must be a card token';
  if (b['description'] !== undefined && typeof b['description'] !== 'string')
    return 'description must be a string';
  return b as unknown as CreatePayment;
}

function problem(status: number, title: string, detail: string): IdempotentResponseInit {
  return {
    status,
    headers: { 'content-type': 'application/problem+json' },
    body: JSON.stringify({ status, title, detail }),
  };
}

/** The payment as the API shows it. */
function view(row: PaymentRow) {
  return {
    id: row.id,
    status: row.status,
    amountCents: row.amount_cents,
    currency: row.currency,
    description: row.description,
    chargeId: row.processor_charge_id,
    failureMessage: row.failure_message,
    createdAt: row.created_at.toISOString(),
  };
}

/** The customer the auth middleware found (in a real service: a session, a JWT, an API key lookup). */
function customerOf(request: Request): string {
  const customer = (request.res?.locals as { customerId?: unknown } | undefined)?.customerId;
  if (typeof customer !== 'string') throw new Error('not authenticated: mount authenticate() first');
  return customer;
}

/** Options of `createPaymentsApp`. */
export interface PaymentsAppOptions {
  readonly db: Kysely<PaymentsDatabase>;
  /** Schema of the idempotency-key table. Default is `inboxkit`. */
  readonly keySchema?: string;
  readonly processorUrl: string;
  /** API key → customer id. A request without a known key gets 401. */
  readonly apiKeys: Readonly<Record<string, string>>;
  /** Lease of an in-flight request (default 60 s) and the handler's time limit (default half of it). */
  readonly leaseMs?: number;
  readonly handlerTimeoutMs?: number;
}

/** The Express app: `POST /payments` (Idempotency-Key required) and `GET /payments/:id`. */
export function createPaymentsApp(options: PaymentsAppOptions): express.Express {
  const { db, processorUrl } = options;
  const keys = idempotencyKeys<PaymentsDatabase, Request>({
    db,
    ...(options.keySchema !== undefined ? { schema: options.keySchema } : {}),
    ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
    ...(options.handlerTimeoutMs !== undefined ? { handlerTimeoutMs: options.handlerTimeoutMs } : {}),
    // Keys belong to the customer: another customer's identical key is another key, and cannot read this one's
    // stored response.
    principal: ({ native }) => customerOf(native),
  });

  async function createPayment(
    request: Request,
    context: IdempotencyContext<PaymentsDatabase>,
  ): Promise<IdempotentResponseInit> {
    const input = parseCreatePayment(request.body);
    // A 4xx is stored and replayed: the same invalid request stays invalid.
    if (typeof input === 'string') return problem(400, 'Invalid payment', input);
    const customerId = customerOf(request);

    // Recovery point 1: the payment row, committed with its record in the key's row. A retry of this key (after a
    // 5xx, a timeout or a crash) skips this and gets the same id back, so it never creates a second payment.
    const payment = await context.phase('create-payment', async (tx) => {
      const row = await tx
        .insertInto('payments')
        .values({
          id: randomUUID(),
          customer_id: customerId,
          amount_cents: input.amountCents,
          currency: input.currency,
          description: input.description ?? null,
          status: 'pending',
          processor_charge_id: null,
          failure_message: null,
          created_at: new Date(),
          updated_at: new Date(),
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      return { id: row.id };
    });

    // Between the phases: this call runs again on a retry, so it carries a downstream key that is the same on
    // every attempt. The payment id is: it comes from the recovery point, and unlike the client's key it is
    // unique across customers.
    const outcome = await chargeCard(
      processorUrl,
      { reference: payment.id, amountCents: input.amountCents, currency: input.currency, card: input.card },
      { idempotencyKey: `payment-${payment.id}`, signal: context.signal },
    );
    // Unknown outcome: answer 502 and release the key (5xx is not stored), so the client's retry resumes here
    // with the same payment and the same downstream key. The payment stays pending meanwhile.
    if (outcome.kind === 'unavailable') {
      return problem(
        502,
        'Card processor unavailable',
        `${outcome.reason}; retry with the same Idempotency-Key`,
      );
    }

    // The last step: the payment's final state and the stored response commit in one transaction.
    return context.transaction(async (tx) => {
      const row = await tx
        .updateTable('payments')
        .set(
          outcome.kind === 'charged'
            ? { status: 'succeeded', processor_charge_id: outcome.chargeId, updated_at: new Date() }
            : { status: 'declined', failure_message: outcome.message, updated_at: new Date() },
        )
        .where('id', '=', payment.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      // A decline is a final answer too (402, stored): retrying the same request will not make the card work.
      return outcome.kind === 'charged'
        ? { status: 201, headers: { location: `/payments/${row.id}` }, body: view(row) }
        : { status: 402, body: view(row) };
    });
  }

  const app = express();
  app.disable('x-powered-by');
  app.use(authenticate(options.apiKeys));
  app.post('/payments', express.json(), idempotentExpressHandler(keys, createPayment));
  app.get('/payments/:id', (request, response, next) => {
    db.selectFrom('payments')
      .selectAll()
      .where('id', '=', request.params['id'] ?? '')
      .where('customer_id', '=', customerOf(request))
      .executeTakeFirst()
      .then((row) => {
        if (row === undefined) response.status(404).json({ status: 404, title: 'No such payment' });
        else response.json(view(row));
      }, next);
  });
  app.use((error: unknown, _request: Request, response: Response, next: NextFunction) => {
    if (response.headersSent) return next(error);
    // express.json()'s own errors (bad JSON, too large) carry their status; anything else is ours.
    const status = (error as { status?: unknown }).status;
    const code = typeof status === 'number' && status >= 400 && status < 500 ? status : 500;
    response
      .status(code)
      .type('application/problem+json')
      .send(JSON.stringify({ status: code, title: code === 500 ? 'Internal Server Error' : 'Bad Request' }));
  });
  return app;
}

/** Bearer API keys → `res.locals.customerId`; 401 otherwise. */
function authenticate(apiKeys: Readonly<Record<string, string>>) {
  return (request: Request, response: Response, next: NextFunction): void => {
    const token = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
    const customerId = token === undefined ? undefined : apiKeys[token];
    if (customerId === undefined) {
      response
        .status(401)
        .type('application/problem+json')
        .send(
          JSON.stringify({
            status: 401,
            title: 'Unauthorized',
            detail: 'Send Authorization: Bearer <api key>.',
          }),
        );
      return;
    }
    response.locals['customerId'] = customerId;
    next();
  };
}

/** Options of `startPaymentsApi`. */
export interface PaymentsApiOptions extends PaymentsAppOptions {
  /** Port on 127.0.0.1. Default is a free one. */
  readonly port?: number;
  readonly logger?: Logger;
}

/** A running API. */
export interface PaymentsApi {
  readonly url: string;
  /** Stops accepting requests, waits for those in flight, then stops the key pruner. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Migrates the key table, creates the payments table, listens, and prunes expired keys every minute.
 *
 * @example
 * const api = await startPaymentsApi({ db, processorUrl, apiKeys: { sk_test_alice: 'alice' } });
 * process.once('SIGTERM', () => void api.stop());
 */
export async function startPaymentsApi(options: PaymentsApiOptions): Promise<PaymentsApi> {
  const keySchema = options.keySchema ?? 'inboxkit';
  await migrateIdempotencyKeys(options.db, { schema: keySchema });
  await createPaymentsTable(options.db);
  const server = createServer(createPaymentsApp({ ...options, keySchema }));
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  // Keys past their 24 h retention are deleted in batches; the same as `inboxkit prune --http` from cron.
  const pruner = startIdempotencyKeyPruner(options.db, {
    schema: keySchema,
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
  });
  let stopping: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () =>
      (stopping ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        });
        await pruner.stop();
      })()),
  };
}
