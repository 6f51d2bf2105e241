// @inboxkit/core/postgres: the inbox on Postgres through the application's SQL library (Kysely built in; any
// other through the SqlSeam), its schema as Kysely migrations, and the same schema as SQL text. This entry point
// is where the Kysely seam (../kysely) meets the store and partition maintenance (./), which only take a seam.

export * from './postgres-inbox-store.js';
export { PostgresInboxStore, type PostgresInboxStoreOptions } from '../kysely/postgres-inbox-store.js';
export { databaseIdentity } from './database-identity.js';
export * from './inbox-migrations.js';
export {
  DEFAULT_RETIRED_RETENTION_MS,
  RETIRED_STATUS,
  deadLetterLifecycleStatements,
  type DeadLetterAge,
  type DeadLetterSelection,
  type InboxAges,
  type RetireAction,
  type RetireDeadLettersRequest,
  type RetireDeadLettersResult,
  type RetiredDeadLetter,
} from './dead-letter-lifecycle.js';
export * from './dead-letter-gauges.js';
export { runSchemaMigrations, type SchemaMigrationsTarget } from '../schema-migrations.js';
export type {
  SchemaMigration,
  SchemaMigrationProvider,
  SchemaMigrationResult,
  SchemaMigrationResultSet,
} from '../schema-migration-types.js';
export {
  partitionLockKey,
  type PartitionMaintenanceOptions,
  type PartitionMaintenanceResult,
  type PartitionStep,
} from './partitions/maintain-inbox-partitions.js';
export type { PartitionMaintenanceScheduleOptions } from './partitions/start-partition-maintenance.js';
export {
  maintainInboxPartitions,
  startPartitionMaintenance,
  type PartitionMaintenanceTarget,
} from '../kysely/partition-maintenance.js';
export { PARTITION_METRIC_NAMES, countPartitionSteps } from './partitions/partition-metrics.js';
export { resolveInboxTableNames, type InboxLayout, type InboxTableNames, type InboxTableOptions } from './inbox-table-names.js';
export { guardedTransaction } from '../kysely/guarded-transaction.js';
export { registerTransactionQuery, transactionQuery, type TransactionQuery } from './transaction-queries.js';
export { transactionControlIn, TransactionControlWatch } from './transaction-control.js';
export { literalStatement } from './sql-literal.js';
export { kyselySeam, type KyselySeamOptions } from '../kysely/kysely-seam.js';
export {
  isStatementError,
  sqlState,
  type SeamTransaction,
  type SqlRow,
  type SqlSeam,
  type SqlStatement,
  type StatementFastPath,
  type TransactionEnd,
  type TransactionOptions,
  type TransactionWork,
} from './sql-seam.js';
