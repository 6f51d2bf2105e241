// A `--schemas` module of an application whose consumer leaves a volatile field out of its fingerprint: it
// exports the consumers' `fingerprints` (the same objects given to `idempotentConsumer({ fingerprint })`) beside
// their `schemas`.

import { Order } from './order-schemas.js';

/** The payload schemas by consumer name. */
export const schemas = { orders: Order };

/** The consumers' `fingerprint` options by consumer name: `sentAt` changes on every resend. */
export const fingerprints = { orders: { exclude: ['sentAt'] } };
