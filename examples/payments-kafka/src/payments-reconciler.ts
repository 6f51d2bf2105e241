// The payments reconciler: the provider keeps idempotency keys for about a day, and a process can die between
// the charge and the commit of its payment row. Neither can be prevented from here, so a scheduled sweep
// compares the provider's charges with the payments table and makes every difference visible — an orphan
// charge (charged, never recorded) is recorded from the provider's side; a second charge for a payment we
// have (a double charge) stays open for a refund by hand, and the `unreconciled` gauge says so.

import type { Logger } from '@inboxkit/core';
import { insertIfAbsent, reconciliationSweeper } from '@inboxkit/core/patterns';
import type { ReconciliationSweeper, RemoteOperation } from '@inboxkit/core/patterns';
import type { Kysely, Transaction } from 'kysely';

import type { PaymentsDatabase } from './payments-consumer.js';

/** A charge as the provider lists it; its key is the provider's charge id. */
export interface ProviderChargeOperation extends RemoteOperation {
  readonly paymentId: string;
  readonly amountCents: number;
  readonly currency: string;
}

/** The local record of a charge. */
export interface RecordedCharge {
  readonly paymentId: string;
  readonly amountCents: number;
}

/** Options of `paymentsReconciler`. */
export interface PaymentsReconcilerOptions {
  readonly db: Kysely<PaymentsDatabase>;
  readonly providerUrl: string;
  /** Schema of the sweeper's tables (`migrateReconciliation`). Default is `inboxkit`. */
  readonly schema?: string;
  /** Record orphan charges as payments. Default is true; false only reports them. */
  readonly repair?: boolean;
  /** Charges younger than this wait for the next sweep. Default is 60,000 ms. */
  readonly settleMs?: number;
  readonly logger?: Logger;
}

interface ListedCharge {
  readonly id: string;
  readonly paymentId: string;
  readonly amountCents: number;
  readonly currency: string;
  readonly created: number;
}

/**
 * The sweeper of the provider's charges against `payments` (run it with `startReconciliation`). Several
 * replicas may run it: one sweeps at a time, the others report `locked`.
 *
 * @example
 * const schedule = startReconciliation(paymentsReconciler({ db, providerUrl }), { intervalMs: 300_000 });
 */
export function paymentsReconciler(
  options: PaymentsReconcilerOptions,
): ReconciliationSweeper<ProviderChargeOperation, RecordedCharge> {
  return reconciliationSweeper<ProviderChargeOperation, RecordedCharge, Transaction<PaymentsDatabase>>({
    name: 'payments-provider-charges',
    db: options.db,
    ...(options.schema !== undefined ? { schema: options.schema } : {}),
    ...(options.settleMs !== undefined ? { settleMs: options.settleMs } : {}),
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    listRemote: async ({ since, until }) => {
      const url = `${options.providerUrl}/v1/charges?created_gte=${since.getTime()}&created_lt=${until.getTime()}`;
      const response = await fetch(url);
      if (!response.ok) throw new Error(`the provider answered ${response.status} to ${url}`);
      const { data } = (await response.json()) as { data: ListedCharge[] };
      return data.map((c) => ({
        key: c.id,
        at: new Date(c.created),
        paymentId: c.paymentId,
        amountCents: c.amountCents,
        currency: c.currency,
      }));
    },
    findLocal: async (tx, charges) => {
      const rows = await tx
        .selectFrom('payments')
        .select(['payment_id', 'provider_charge_id', 'amount_cents'])
        .where(
          'provider_charge_id',
          'in',
          charges.map((c) => c.key),
        )
        .execute();
      return new Map(
        rows.map((r) => [r.provider_charge_id, { paymentId: r.payment_id, amountCents: r.amount_cents }]),
      );
    },
    compare: (charge, recorded) =>
      charge.amountCents === recorded.amountCents
        ? undefined
        : `charged ${charge.amountCents}, recorded ${recorded.amountCents}`,
    ...(options.repair === false
      ? {}
      : {
          repair: async (tx, difference) => {
            if (difference.kind !== 'missing-local') return false;
            const charge = difference.operation;
            // An orphan charge becomes its payment; a second charge of a recorded payment is a double charge:
            // nothing to record, it stays open until someone refunds it and resolves it.
            const recorded = await insertIfAbsent(tx, {
              table: 'payments',
              values: {
                payment_id: charge.paymentId,
                provider_charge_id: charge.key,
                amount_cents: charge.amountCents,
                currency: charge.currency,
                charged_at: charge.at,
              },
              key: ['payment_id'],
            });
            return recorded.inserted;
          },
        }),
  });
}
