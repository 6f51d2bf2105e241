// @inboxkit/cli: the `inboxkit` command (migrate, status, prune, dlq list|replay, doctor, console) and the same
// operations as a library: `runCli` for the whole command line, `replayDeadLetters` / `listDeadLetters` /
// `inboxStatus` / `diagnose` for programs that embed them.

export { runCli, CLI_VERSION } from './run-cli.js';
export type { RunCliOptions } from './run-cli.js';
export { main } from './main.js';
export type { CliIo, OutputStream } from './cli-io.js';
export type { CliServices, OpenedDatabase, OpenedTransport, OpenTransportOptions } from './cli-services.js';
export { defaultCliServices } from './transports/default-cli-services.js';
export { parseCommandLine, TRANSPORTS, COMMANDS } from './command-line.js';
export type { ParsedCommand, CommandName, TransportName } from './command-line.js';
export { EXIT } from './commands/command-context.js';
export { UsageError } from './usage-error.js';
export { usage } from './usage.js';

export { replayDeadLetters } from './replay/replay-dead-letters.js';
export { replayFromDlq } from './replay/replay-from-dlq.js';
export type { DlqReplayRequest, ReplayFromDlqContext } from './replay/replay-from-dlq.js';
export { startConsoleServer } from './console/console-server.js';
export type { ConsoleServer, ConsoleServerOptions } from './console/console-server.js';
export type { ConsoleDlq } from './console/console-dlq.js';
export type {
  ReplayDeadLettersOptions,
  ReplayEntryResult,
  ReplaySummary,
  ReplayAction,
  ReplayStop,
} from './replay/replay-dead-letters.js';
export { listDeadLetters, errorShape } from './replay/list-dead-letters.js';
export type {
  ListDeadLettersOptions,
  DeadLetterListing,
  DeadLetterGroup,
  ListedDeadLetter,
} from './replay/list-dead-letters.js';
export { predictReplay, describePrediction, REPLAY_PREDICTIONS } from './replay/predict-replay.js';
export { isParked, isDeadLetterOutcome } from './replay/parked.js';
export type { ReplayPrediction } from './replay/predict-replay.js';
export { matchesFilter } from './replay/dead-letter-filter.js';
export { recordedConsumer } from './replay/recorded-consumer.js';
export type { DeadLetterFilter } from './replay/dead-letter-filter.js';
export { replayDestination, replayMessage } from './replay/replay-message.js';
export type { ReplayDestination } from './replay/replay-message.js';
export { RateLimiter } from './replay/rate-limiter.js';
export { systemClock } from './replay/clock.js';
export type { Clock } from './replay/clock.js';

export type { InboxLookup, InboxRowStatus } from './inbox/inbox-lookup.js';
export { replayFingerprint } from './replay/replay-fingerprint.js';
export { inspectorInboxLookup } from './inbox/inspector-inbox-lookup.js';
export { postgresInboxLookup } from './inbox/postgres-inbox-lookup.js';
export { inboxStore } from './inbox/inbox-store.js';
export type { InboxTableName } from './inbox/inbox-store.js';
export { inboxStatus } from './inbox/inbox-status.js';
export type {
  InboxStatusOptions,
  InboxStatusReport,
  ConsumerStatus,
  OldestProcessing,
  LastReplay,
} from './inbox/inbox-status.js';

export { diagnose } from './doctor/diagnose.js';
export type { DiagnoseOptions, DoctorReport } from './doctor/diagnose.js';
export { checkConfigInvariants, retryHorizonMs, worstCaseRetryTimeMs } from './doctor/config-invariants.js';
export type { DoctorCheck } from './doctor/config-invariants.js';
export { readConsumerSettings, CORE_DEFAULTS } from './doctor/consumer-settings.js';
export type { ConsumerSettings } from './doctor/consumer-settings.js';

export { resolveConnectionSettings, describeConnectionSettings } from './settings/connection-settings.js';
export type { ConnectionSettings, ConnectionFlags } from './settings/connection-settings.js';
export { maskUrl, maskSecretsIn } from './settings/mask-url.js';
export {
  maskConnectionString,
  connectionStringSecrets,
  isSecretParameter,
} from './settings/mask-connection-string.js';
export { SecretScrubber, secretScrubber, SECRET_ENVIRONMENT } from './settings/secret-scrubber.js';
export { pgConnectionConfig, KEY_VALUE_PARAMETERS } from './settings/pg-connection-config.js';
export type { PgConnectionConfig } from './settings/pg-connection-config.js';
export { parseKeyValueConnectionString } from './settings/key-value-connection-string.js';
export type {
  KeyValueEntry,
  ParsedKeyValueConnectionString,
} from './settings/key-value-connection-string.js';
export { editAndRetry, checkEditedPayload } from './replay/edit-and-retry.js';
export type { EditAndRetryContext, EditAndRetryRequest, EditAndRetryResult } from './replay/edit-and-retry.js';
export { loadConsumerModule, loadSchemas } from './settings/load-schemas.js';
export type { ConsumerFingerprints, ConsumerModule, ConsumerSchemas } from './settings/load-schemas.js';
