// The console tests' consumer schema, as an application's `--schemas` module exports it: `schemas` by consumer.

import { z } from 'zod';

/** What an order message carries; a negative amount fails the schema. */
export const Order = z.object({ orderId: z.string(), amountCents: z.number().int().nonnegative() });

/** The payload schemas by consumer name (`inboxkit dlq edit --schemas`, `inboxkit console --schemas`). */
export const schemas = { orders: Order };
