// @inboxkit/core/patterns: the design's second-layer patterns as helpers on the handler's transaction — a
// version guard for reordered events, a natural-key insert, advisory-lock claims, and a reconciliation sweeper
// for downstreams without idempotency. Postgres SQL over a minimal executor (Kysely, node-postgres, or your own).

export { sqlExecutorOf, type SqlExecutor, type SqlRow, type SqlTransaction } from './sql-executor.js';
export { quoteIdentifier, quoteTable, type TableName } from './sql-identifier.js';
export { applyIfNewer, type ApplyIfNewerOptions, type ApplyIfNewerResult } from './apply-if-newer.js';
export {
  defineStateMachine,
  IllegalTransitionError,
  transitionState,
  type StateMachine,
  type TransitionStateOptions,
  type TransitionStateResult,
} from './state-transition.js';
export { compareAndSet, type CompareAndSetOptions, type CompareAndSetResult } from './compare-and-set.js';
export { insertIfAbsent, type InsertIfAbsentOptions, type InsertIfAbsentResult } from './insert-if-absent.js';
export {
  advisoryLock,
  tryAdvisoryLock,
  lockName,
  AdvisoryLockBusyError,
  DEFAULT_ADVISORY_LOCK_WAIT_MS,
  type AdvisoryLockOptions,
  type AdvisoryLockResult,
} from './advisory-lock.js';
export {
  reconciliationSweeper,
  startReconciliation,
  type OpenDifference,
  type ReconciliationDifference,
  type ReconciliationReport,
  type ReconciliationSchedule,
  type ReconciliationScheduleOptions,
  type ReconciliationSweeper,
  type ReconciliationSweeperOptions,
  type RemoteOperation,
  type TransactionRunner,
} from './reconciliation-sweeper.js';
export {
  migrateReconciliation,
  reconciliationSchemaSql,
  reconciliationSchemaStatements,
  DEFAULT_RECONCILIATION_SCHEMA,
} from './reconciliation-schema.js';
export { PATTERN_METRIC_NAMES } from './pattern-metrics.js';
