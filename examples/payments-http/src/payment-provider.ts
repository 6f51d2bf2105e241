// A fake card processor over real HTTP, written the way real ones behave towards a caller that retries: a
// request with an Idempotency-Key it already charged gets that first charge back, not a second one. It can
// also charge and then fail the answer (`failAfterCharge`): the 5xx-after-the-money-moved that makes the
// downstream key necessary.

import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A charge the processor made (money moved). */
export interface ProcessorCharge {
  readonly id: string;
  /** The merchant's reference: our payment id. */
  readonly reference: string;
  readonly amountCents: number;
  readonly currency: string;
  readonly idempotencyKey: string | undefined;
}

/** One request the processor received. */
export interface ProcessorRequest {
  readonly reference: string;
  readonly idempotencyKey: string | undefined;
  /** `charged`: new money moved; `replayed`: a known key, the first charge returned; `declined`. */
  readonly result: 'charged' | 'replayed' | 'declined';
  /** The processor charged but answered 503 instead of the charge. */
  readonly failedAfterCharge: boolean;
}

/** A running fake processor. */
export interface FakeCardProcessor {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  /** Every charge, in order. */
  charges(): readonly ProcessorCharge[];
  /** Charges for one reference: 1 is right, 2 is a customer charged twice. */
  chargesFor(reference: string): number;
  /** Every request, in order. */
  requests(): readonly ProcessorRequest[];
  /** The next new charge is made, and then answered with 503 (the caller cannot tell it happened). */
  failAfterCharge(): void;
  close(): Promise<void>;
}

/** A card the processor declines (402). */
export const DECLINED_CARD = 'tok_chargeDeclined';

async function readJson(request: IncomingMessage): Promise<Record<string, unknown>> {
  let text = '';
  for await (const chunk of request) text += String(chunk);
  return JSON.parse(text) as Record<string, unknown>;
}

function send(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

/**
 * Starts the processor on an ephemeral port of 127.0.0.1: `POST /v1/charges` with
 * `{ reference, amountCents, currency, card }` and an optional `Idempotency-Key`.
 */
export async function startFakeCardProcessor(): Promise<FakeCardProcessor> {
  const charges: ProcessorCharge[] = [];
  const requests: ProcessorRequest[] = [];
  const byKey = new Map<string, ProcessorCharge>();
  let failNext = false;

  const server = createServer((request, response) => {
    void (async () => {
      if (request.method !== 'POST' || request.url !== '/v1/charges') {
        return send(response, 404, { error: 'not_found' });
      }
      const body = await readJson(request);
      const key = request.headers['idempotency-key'] as string | undefined;
      const reference = String(body['reference']);
      const known = key === undefined ? undefined : byKey.get(key);
      if (known !== undefined) {
        requests.push({ reference, idempotencyKey: key, result: 'replayed', failedAfterCharge: false });
        return send(response, 200, { ...known, replayed: true });
      }
      if (body['card'] === DECLINED_CARD) {
        requests.push({ reference, idempotencyKey: key, result: 'declined', failedAfterCharge: false });
        return send(response, 402, { error: 'card_declined', message: 'The card was declined.' });
      }
      const charge: ProcessorCharge = {
        id: `ch_${randomBytes(6).toString('hex')}`,
        reference,
        amountCents: Number(body['amountCents']),
        currency: String(body['currency']),
        idempotencyKey: key,
      };
      charges.push(charge);
      if (key !== undefined) byKey.set(key, charge);
      const failedAfterCharge = failNext;
      failNext = false;
      requests.push({ reference, idempotencyKey: key, result: 'charged', failedAfterCharge });
      // The money moved; the caller hears "unavailable".
      if (failedAfterCharge) return send(response, 503, { error: 'temporarily_unavailable' });
      send(response, 200, { ...charge, replayed: false });
    })().catch((error: unknown) => send(response, 500, { error: String(error) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    charges: () => [...charges],
    chargesFor: (reference) => charges.filter((c) => c.reference === reference).length,
    requests: () => [...requests],
    failAfterCharge: () => void (failNext = true),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
