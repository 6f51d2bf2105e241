// A fake payment provider over real HTTP, with the behaviour that makes idempotency keys matter: it charges on
// every request whose Idempotency-Key it has not seen, answers a known key with the first charge, and can
// lose a response after it charged (the classic timeout: the charge happened, the caller never heard).

import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A charge the provider made. */
export interface ProviderCharge {
  readonly id: string;
  readonly paymentId: string;
  readonly amountCents: number;
  readonly currency: string;
  /** When the charge was made, in ms since the epoch. */
  readonly created: number;
  readonly idempotencyKey: string | undefined;
}

/** One request, as the provider's log shows it. */
export interface ProviderRequest {
  readonly paymentId: string;
  readonly idempotencyKey: string | undefined;
  /** `charged`: a new charge; `replayed`: a known key, the first charge returned; `declined`: refused. */
  readonly result: 'charged' | 'replayed' | 'declined';
  /** True when the provider dropped the connection instead of answering. */
  readonly responseLost: boolean;
}

/** A running fake provider. */
export interface FakePaymentProvider {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  /** Every charge made, in order. */
  charges(): readonly ProviderCharge[];
  /** Charges made for one payment: 1 is right, 2 is a customer charged twice. */
  chargesFor(paymentId: string): number;
  /** Every request, in order. */
  requests(): readonly ProviderRequest[];
  /** The next request for `paymentId` is charged, but its response never arrives (the connection is reset). */
  loseNextResponse(paymentId: string): void;
  close(): Promise<void>;
}

/** Cards the provider declines (`402`). */
export const DECLINED_CARD = 'tok_chargeDeclined';

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  let text = '';
  for await (const chunk of req) text += String(chunk);
  return JSON.parse(text) as Record<string, unknown>;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/**
 * Starts the provider on an ephemeral port of 127.0.0.1. `POST /v1/charges` with a JSON body
 * `{ paymentId, amountCents, currency, card }` and an optional `Idempotency-Key` header;
 * `GET /v1/charges?created_gte=<ms>&created_lt=<ms>` lists the charges made in that window (what a
 * reconciliation job reads).
 */
export async function startFakePaymentProvider(): Promise<FakePaymentProvider> {
  const charges: ProviderCharge[] = [];
  const requests: ProviderRequest[] = [];
  const byKey = new Map<string, ProviderCharge>();
  const losing = new Set<string>();

  const server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://provider');
      if (req.method === 'GET' && url.pathname === '/v1/charges') {
        const from = Number(url.searchParams.get('created_gte') ?? 0);
        const to = Number(url.searchParams.get('created_lt') ?? Number.MAX_SAFE_INTEGER);
        return send(res, 200, { data: charges.filter((c) => c.created >= from && c.created < to) });
      }
      if (req.method !== 'POST' || url.pathname !== '/v1/charges')
        return send(res, 404, { error: 'not found' });
      const body = await readJson(req);
      const key = req.headers['idempotency-key'] as string | undefined;
      const paymentId = String(body['paymentId']);
      const responseLost = losing.delete(paymentId);
      const known = key === undefined ? undefined : byKey.get(key);
      let status = 200;
      let answer: unknown;
      if (known !== undefined) {
        requests.push({ paymentId, idempotencyKey: key, result: 'replayed', responseLost });
        answer = { ...known, replayed: true };
      } else if (body['card'] === DECLINED_CARD) {
        requests.push({ paymentId, idempotencyKey: key, result: 'declined', responseLost });
        status = 402;
        answer = { error: 'card_declined', message: 'insufficient funds' };
      } else {
        const charge: ProviderCharge = {
          id: `ch_${randomBytes(6).toString('hex')}`,
          paymentId,
          amountCents: Number(body['amountCents']),
          currency: String(body['currency']),
          created: Date.now(),
          idempotencyKey: key,
        };
        charges.push(charge);
        if (key !== undefined) byKey.set(key, charge);
        requests.push({ paymentId, idempotencyKey: key, result: 'charged', responseLost });
        answer = { ...charge, replayed: false };
      }
      // The charge is made; the caller will not hear about it.
      if (responseLost) return res.socket?.destroy();
      send(res, status, answer);
    })().catch((error: unknown) => send(res, 500, { error: String(error) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    charges: () => [...charges],
    chargesFor: (paymentId) => charges.filter((c) => c.paymentId === paymentId).length,
    requests: () => [...requests],
    loseNextResponse: (paymentId) => void losing.add(paymentId),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
