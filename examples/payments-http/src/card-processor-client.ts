// The API's side of the card processor: one charge call, its answer sorted into what the handler must do.
// The Idempotency-Key it sends is the downstream key: the same on every retry of the same payment.

/** What the handler does next. */
export type ChargeOutcome =
  | { readonly kind: 'charged'; readonly chargeId: string }
  | { readonly kind: 'declined'; readonly message: string }
  /** 5xx, 429 or no answer: the charge may or may not have happened; only a retry with the same key can tell. */
  | { readonly kind: 'unavailable'; readonly reason: string };

/** A charge request. */
export interface ChargeRequest {
  /** Our payment id: the processor's reference. */
  readonly reference: string;
  readonly amountCents: number;
  readonly currency: string;
  readonly card: string;
}

/**
 * Charges at the processor. `idempotencyKey` must be the same on every attempt for this payment, so a retry
 * after an unknown outcome returns the first charge instead of making a second one.
 */
export async function chargeCard(
  processorUrl: string,
  charge: ChargeRequest,
  options: { readonly idempotencyKey: string; readonly signal: AbortSignal },
): Promise<ChargeOutcome> {
  let response: Response;
  try {
    response = await fetch(`${processorUrl}/v1/charges`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': options.idempotencyKey },
      body: JSON.stringify(charge),
      signal: AbortSignal.any([options.signal, AbortSignal.timeout(10_000)]),
    });
  } catch (error) {
    return { kind: 'unavailable', reason: error instanceof Error ? error.message : String(error) };
  }
  const body = (await response.json().catch(() => ({}))) as { id?: string; message?: string };
  if (response.ok && typeof body.id === 'string') return { kind: 'charged', chargeId: body.id };
  if (response.status === 402) return { kind: 'declined', message: body.message ?? 'card declined' };
  return { kind: 'unavailable', reason: `processor answered ${response.status}` };
}
