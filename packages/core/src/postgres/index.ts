// @inboxkit/core/postgres: the inbox on Postgres through the application's Kysely instance, its schema as
// Kysely migrations, and the same schema as SQL text.

export * from './postgres-inbox-store.js';
export * from './inbox-migrations.js';
export { inboxSchemaSql, inboxSchemaStatements, inboxSchemaDownStatements } from './inbox-schema.js';
export { resolveInboxTableNames, type InboxTableNames, type InboxTableOptions } from './inbox-table-names.js';
export { guardedTransaction } from './guarded-transaction.js';
