// The shipments service: each JetStream message is one shipment event; applying it moves the shipment's status
// in the same transaction as the inbox row, so a redelivery, a producer's re-send or a replay is a `duplicate`.

import { idempotentConsumer, PermanentError } from '@inboxkit/core';
import type { IdempotentConsumer, OutcomeEvent } from '@inboxkit/core';
import { PostgresInboxStore } from '@inboxkit/core/postgres';
import { sql } from 'kysely';
import type { Kysely, Transaction } from 'kysely';
import { z } from 'zod';

export interface ShipmentsDatabase {
  shipments: { id: string; status: string; events: number };
}

export const shipmentEvent = z.object({
  shipment: z.string(),
  status: z.enum(['label-created', 'picked-up', 'delivered']),
});
export type ShipmentEvent = z.infer<typeof shipmentEvent>;

/** Creates the table the handler writes. */
export async function createShipmentTables(db: Kysely<ShipmentsDatabase>): Promise<void> {
  await sql`CREATE TABLE IF NOT EXISTS shipments (id text PRIMARY KEY, status text NOT NULL, events int NOT NULL)`.execute(
    db,
  );
}

/** The idempotent consumer: upserts the shipment, counting the events applied to it. */
export function shipmentsConsumer(
  db: Kysely<ShipmentsDatabase>,
  schema: string,
  onOutcome?: (event: OutcomeEvent) => void,
): IdempotentConsumer<ShipmentEvent, Transaction<ShipmentsDatabase>> {
  return idempotentConsumer<ShipmentEvent, Transaction<ShipmentsDatabase>>({
    name: 'shipments',
    store: new PostgresInboxStore({ db, schema }),
    schema: shipmentEvent,
    maxAttempts: 3,
    ...(onOutcome !== undefined ? { hooks: { onOutcome } } : {}),
    handler: async ({ payload }, { tx }) => {
      if (payload.shipment === '') throw new PermanentError('an event without a shipment');
      await tx
        .insertInto('shipments')
        .values({ id: payload.shipment, status: payload.status, events: 1 })
        .onConflict((c) =>
          c.column('id').doUpdateSet({ status: payload.status, events: sql<number>`shipments.events + 1` }),
        )
        .execute();
    },
  });
}
