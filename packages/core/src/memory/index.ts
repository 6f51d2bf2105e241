// @inboxkit/core/memory: an in-process inbox for unit tests and examples. Single process only.

export * from './in-memory-inbox-store.js';
export { InMemoryTransaction, type InMemoryEffect } from './in-memory-transaction.js';
