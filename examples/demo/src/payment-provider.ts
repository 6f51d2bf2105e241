// A fake payment provider that behaves like the real ones on the one point that matters here: it remembers
// idempotency keys. A second charge with a key it has seen returns the first charge instead of charging again,
// so a handler that passes `context.downstreamKey` charges a card once however often it runs.

import { randomBytes } from 'node:crypto';

/** What the handler asks the provider to do. */
export interface ChargeRequest {
  readonly idempotencyKey: string;
  readonly paymentId: string;
  readonly amountCents: number;
  readonly currency: string;
  readonly card: string;
}

/** A charge the provider made. */
export interface Charge {
  readonly id: string;
  readonly paymentId: string;
  readonly amountCents: number;
}

/** One call, as the provider's request log shows it. */
export interface ProviderCall {
  readonly paymentId: string;
  readonly idempotencyKey: string;
  /** `charged`: a new charge; `replayed`: the key was known, the first charge returned; the rest failed. */
  readonly result: 'charged' | 'replayed' | 'declined' | 'unavailable';
}

/** The provider answered 503: try again later. */
export class ProviderUnavailableError extends Error {
  override readonly name = 'ProviderUnavailableError';
}

/** The card was declined: trying again will not help. */
export class CardDeclinedError extends Error {
  override readonly name = 'CardDeclinedError';
}

/** Test card that is always declined (as in Stripe's test mode). */
export const DECLINED_CARD = 'tok_chargeDeclined';

/**
 * In-process stand-in for a payment provider. Keys are remembered for the life of the object; a real
 * provider forgets them after its retention (Stripe: 24 h), which is what bounds correctness for effects
 * outside the database.
 */
export class FakePaymentProvider {
  readonly #calls: ProviderCall[] = [];
  readonly #byKey = new Map<string, { readonly request: ChargeRequest; readonly charge: Charge }>();
  readonly #outages = new Map<string, number>();

  /** The next `times` calls for `paymentId` answer 503. */
  failNextCalls(paymentId: string, times = 1): void {
    this.#outages.set(paymentId, (this.#outages.get(paymentId) ?? 0) + times);
  }

  async charge(request: ChargeRequest): Promise<Charge> {
    const outage = this.#outages.get(request.paymentId) ?? 0;
    if (outage > 0) {
      this.#outages.set(request.paymentId, outage - 1);
      this.#log(request, 'unavailable');
      throw new ProviderUnavailableError('payment provider answered 503 Service Unavailable');
    }
    const known = this.#byKey.get(request.idempotencyKey);
    if (known !== undefined) {
      // Real providers refuse a known key with other parameters: it is a bug in the caller, not a retry.
      if (
        known.request.amountCents !== request.amountCents ||
        known.request.paymentId !== request.paymentId
      ) {
        throw new Error(`idempotency key ${request.idempotencyKey} was used with other parameters`);
      }
      this.#log(request, 'replayed');
      return known.charge;
    }
    if (request.card === DECLINED_CARD) {
      this.#log(request, 'declined');
      throw new CardDeclinedError('card declined: insufficient funds');
    }
    const charge: Charge = {
      id: `ch_${randomBytes(6).toString('hex')}`,
      paymentId: request.paymentId,
      amountCents: request.amountCents,
    };
    this.#byKey.set(request.idempotencyKey, { request, charge });
    this.#log(request, 'charged');
    return charge;
  }

  /** Every call so far, in order. */
  get calls(): readonly ProviderCall[] {
    return [...this.#calls];
  }

  /** Charges actually made for a payment (calls answered from a known key are not charges). */
  chargesFor(paymentId: string): number {
    return this.#calls.filter((c) => c.paymentId === paymentId && c.result === 'charged').length;
  }

  #log(request: ChargeRequest, result: ProviderCall['result']): void {
    this.#calls.push({ paymentId: request.paymentId, idempotencyKey: request.idempotencyKey, result });
  }
}
