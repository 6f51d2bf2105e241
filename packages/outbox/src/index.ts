// @inboxkit/outbox: the transactional outbox and its relay — publish exactly the messages a transaction
// committed, at least once, each with an id fixed at enqueue that downstream inboxes deduplicate.

export type { OutboxMessage } from './outbox-message.js';
export { enqueue, outbox, type BoundOutbox, type EnqueueOptions, type OutboxTransaction } from './enqueue.js';
export { deterministicMessageId } from './deterministic-message-id.js';
export { transactionalOutbox, type HandlerEnqueueOptions } from './transactional-outbox.js';
export { uuidv7 } from './uuid-v7.js';
export { outboxMigrations, migrateOutbox, type MigrateOutboxOptions } from './outbox-migrations.js';
export { outboxSchemaSql, outboxSchemaStatements, outboxSchemaDownStatements } from './outbox-schema.js';
export { resolveOutboxTableNames, type OutboxTableNames, type OutboxTableOptions } from './outbox-table-names.js';
export {
  startOutboxRelay,
  OUTBOX_METRIC_NAMES,
  type ListenClient,
  type ListenSource,
  type OutboxRelay,
  type OutboxRelayOptions,
} from './outbox-relay.js';
