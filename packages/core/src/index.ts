// @inboxkit/core: exactly-once effect from at-least-once delivery. The message id is recorded in the same
// Postgres transaction as the handler's writes; transports settle the broker only after that is durable.

export * from './errors.js';
export type * from './message.js';
export * from './outcome.js';
export * from './dead-letter-record.js';
export {
  clipMessageId,
  COMPACT_ERROR_MESSAGE_LENGTH,
  DEAD_LETTER_FORMS,
  deadLetterForms,
  MINIMAL_ID_LENGTH,
  sendInFittingForm,
  type DeadLetterForm,
  type DeadLetterFormSpec,
  type FormAttempt,
  type FormsResult,
} from './delivery/dead-letter-forms.js';
export type * from './transport.js';
export type * from './consumer-types.js';
export * from './store.js';
export { idempotentConsumer, MAX_BATCH_TRANSACTION_SIZE, MAX_RETRY_DELAY_MS } from './idempotent-consumer.js';
export {
  deliveryContext,
  extractTraceContext,
  inboxkitTracer,
  injectTraceHeaders,
  withIncomingSpan,
  withSendSpans,
} from './trace-context.js';
export {
  checkFastPath,
  DEFAULT_FAST_PATH_TIMEOUT_MS,
  fastPathScope,
  type FastPath,
  type FastPathResult,
} from './fast-path.js';
export { FastPathAuthority } from './fast-path-authority.js';
export { FastPathGuard, type FastPathExpectation } from './fast-path-guard.js';
export {
  statementHandler,
  type EffectStatement,
  type StatementBuilder,
  type StatementHandler,
  type StatementTransaction,
} from './statement-handler.js';
export { CONSUMER_DEFAULTS, MAX_MESSAGE_ID_LENGTH_LIMIT } from './consumer-config.js';
export {
  classifyError,
  contentRejection,
  isPermanentDataError,
  isTransientNetworkError,
  type ErrorClassification,
} from './classify-error.js';
export { clipText, recordableDate, recordableText, REPLACEMENT_CHARACTER } from './recordable.js';
export { DEFAULT_BACKOFF, backoffDelayMs, maxBackoffDelayMs, retryHorizonMs, type ResolvedBackoff } from './backoff.js';
export { canonicalJson, exactCanonicalJson, fingerprintJson, fingerprintPayload } from './fingerprint.js';
export {
  checkFingerprintResolver,
  FingerprintError,
  omitPaths,
  pickPaths,
  type CheckedFingerprintResolver,
  type FingerprintFields,
  type FingerprintResolver,
} from './fingerprint-resolver.js';
export { downstreamKey, downstreamStepKey, MAX_DOWNSTREAM_STEP_LENGTH } from './downstream-key.js';
export { decodeJson, decodeJsonBody, validatePayload } from './decode-payload.js';
export { toErrorInfo } from './error-info.js';
export { METRIC_NAMES } from './consumer-metrics.js';
export { silentLogger } from './silent-logger.js';
export { pruneInbox, startPruner, startPruneSchedule, type Pruner, type PrunerOptions, type PruneScheduleOptions } from './prune-inbox.js';
export { replayDecision, type ReplayDecision } from './replay-decision.js';
export { amendmentOutcome, forgetOutcome, parseOperatorAudit, type OperatorAudit } from './operator-audit.js';
export {
  StartTimeoutError,
  retryStart,
  errorChain,
  errorField,
  isTransientSocketError,
  tlsFailure,
  isProgrammerError,
  startRetryDelay,
  abortableSleep,
  type RetryStartOptions,
} from './start-retry.js';
export {
  isTransientDatabaseError,
  retryDatabaseStart,
  type DatabaseStartRetryOptions,
} from './database-start-retry.js';
export type { TransportFeatures } from './delivery/transport-features.js';
export type { BrokerSettlement, LeaveReason } from './delivery/broker-settlement.js';
export { settle, retryCopyTooLarge, MAX_LEAVE_HOLD_MS, type Settlement, type SettleOptions } from './delivery/settle.js';
export {
  DeliveryGuard,
  FIRST_OUTAGE_PAUSE_MS,
  MAX_OUTAGE_PAUSE_MS,
  type DeliveryGuardOptions,
  type GuardedOutcome,
  type HandleRejected,
} from './delivery/delivery-guard.js';
export { AttemptCharger, type AttemptChargerOptions } from './delivery/attempt-charger.js';
export { attemptLedgerOf, withAttemptLedger, type AttemptLedger } from './delivery/attempt-ledger.js';
export { DeliveryKit, type DeliveryKitOptions } from './delivery/delivery-kit.js';
export { DeliveryScheduler, type DeliverySchedulerOptions } from './delivery/delivery-scheduler.js';
export { nonEmptyText, positiveIntegerText, producerTimestampMs } from './delivery/inbound-fields.js';
export { startFailureClassifier, TRANSIENT, type StartFailureTables } from './delivery/start-failure.js';
export { backstopLimit, isBackstop, type BackstopPolicy } from './delivery/broker-backstop.js';
export { deadLetterEntry, deadLetterId, takenDeadLetter, type TakenVerbs } from './delivery/dead-letter-reader.js';
export {
  optionChecks,
  settledWithin,
  transportLogger,
  type BackoffOptions,
  type IntegerRange,
  type NamedBound,
  type NumberRange,
  type OptionChecks,
} from './delivery/transport-options.js';
