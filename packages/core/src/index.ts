// @inboxkit/core: exactly-once effect from at-least-once delivery. The message id is recorded in the same
// Postgres transaction as the handler's writes; transports settle the broker only after that is durable.

export * from './errors.js';
export type * from './message.js';
export * from './outcome.js';
export * from './dead-letter-record.js';
export type * from './transport.js';
export type * from './consumer-types.js';
export type * from './store.js';
