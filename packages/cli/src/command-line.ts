// Turns argv into one typed command. Every mistake becomes a UsageError that names the flag and says what
// to write instead; the CLI prints it with the command's usage and exits 2.

import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';

import type { DeadLetterFilter } from './replay/dead-letter-filter.js';
import { resolveConnectionSettings, UnknownKafkaClientError } from './settings/connection-settings.js';
import type { ConnectionSettings } from './settings/connection-settings.js';
import { parseDuration, parsePositiveInt, parseRate, parseSince } from './settings/parse-values.js';
import { UsageError } from './usage-error.js';
import type { FastPathSettings } from './inbox/fast-path-entries.js';
import type { InboxLayout } from '@inboxkit/core/postgres';

/** The transports `dlq` commands read. */
export const TRANSPORTS = ['kafka', 'rabbitmq', 'sqs', 'nats'] as const;
export type TransportName = (typeof TRANSPORTS)[number];

/** Every command name, as typed. */
export const COMMANDS = [
  'migrate',
  'status',
  'prune',
  'partitions',
  'dlq list',
  'dlq replay',
  'dlq edit',
  'forget',
  'discard',
  'archive',
  'doctor',
  'console',
] as const;
export type CommandName = (typeof COMMANDS)[number];
/** What `help` explains: a command, or `dlq` (all of its commands). */
export type HelpTopic = CommandName | 'dlq';

interface Common {
  readonly connection: ConnectionSettings;
  readonly json: boolean;
}

export interface HelpCommand {
  readonly command: 'help';
  /** The command to explain, or `undefined` for the overview. */
  readonly topic: HelpTopic | undefined;
}
export interface VersionCommand {
  readonly command: 'version';
}
export interface MigrateCommand extends Common {
  readonly command: 'migrate';
  /** Also create the reconciliation sweeper's tables (`--reconciliation`), in the inbox's schema. */
  readonly reconciliation: boolean;
  /** `--layout table|daily-partitions`: the inbox's layout (core's `InboxTableOptions.layout`). */
  readonly layout: InboxLayout;
}
/** `inboxkit partitions`: partition maintenance of a partitioned inbox (core's `maintainInboxPartitions`). */
export interface PartitionsCommand extends Common {
  readonly command: 'partitions';
  readonly aheadDays: number;
  readonly dedupeWindowMs: number;
  readonly lockTimeoutMs: number;
  readonly dryRun: boolean;
}
export interface StatusCommand extends Common {
  readonly command: 'status';
  readonly consumer: string | undefined;
  /** "Expiring soon" means within this many ms. */
  readonly expiringWithinMs: number;
  /** The dedupe window to compare row ages against. */
  readonly dedupeWindowMs: number;
}
/** What `prune` deletes: the inbox's expired rows, the HTTP idempotency keys (`@inboxkit/http`), or both. */
export const PRUNE_TARGETS = ['inbox', 'http', 'all'] as const;
export type PruneTarget = (typeof PRUNE_TARGETS)[number];

export interface PruneCommand extends Common {
  readonly command: 'prune';
  readonly target: PruneTarget;
  readonly consumer: string | undefined;
  readonly dryRun: boolean;
  readonly batchSize: number;
  /** `--retired-retention`: how long discarded and archived dead letters are kept. Default is 30 days. */
  readonly retiredRetentionMs: number;
  /** The idempotency-key table (`--http-table [SCHEMA.]TABLE`); default `<--schema>.idempotency_key`. */
  readonly httpTable: { readonly schema: string; readonly table: string };
}
interface DlqCommon extends Common {
  readonly transport: TransportName;
  readonly from: string;
  readonly filter: DeadLetterFilter;
  /** Kafka only: the consumer group that tracks what `take` has removed. */
  readonly group: string | undefined;
}
export interface DlqListCommand extends DlqCommon {
  readonly command: 'dlq list';
  readonly limit: number;
  /** `--schemas MODULE`: its `fingerprints` (consumers' `fingerprint` options) make the payload-mismatch prediction. */
  readonly schemasModule: string | undefined;
}
export interface DlqReplayCommand extends DlqCommon {
  readonly command: 'dlq replay';
  readonly to: string | undefined;
  readonly limit: number | undefined;
  readonly ratePerSecond: number | undefined;
  readonly dryRun: boolean;
  /** `--include-parked`: replay parked dead letters too (a replay of them failed before). */
  readonly includeParked: boolean;
  readonly requestedBy: string;
  /** `--schemas MODULE`: its `fingerprints` (consumers' `fingerprint` options) make the payload-mismatch prediction. */
  readonly schemasModule: string | undefined;
}
export interface DlqEditCommand extends Common {
  readonly command: 'dlq edit';
  readonly transport: TransportName;
  readonly from: string;
  readonly group: string | undefined;
  readonly to: string | undefined;
  readonly consumer: string;
  readonly messageId: string;
  /** `--payload-file FILE` (`-` = stdin): the corrected payload. */
  readonly payloadFile: string;
  readonly reason: string;
  /** `--schemas MODULE`: a module exporting `schemas`, the consumers' payload schemas by consumer name. */
  readonly schemasModule: string | undefined;
  readonly requestedBy: string;
}
export interface ForgetCommand extends Common {
  readonly command: 'forget';
  readonly consumer: string;
  readonly messageId: string;
  readonly reason: string;
  readonly requestedBy: string;
  /** The consumers' Redis fast path (`--redis-url`, env `REDIS_URL`), whose entry is deleted too; none if unset. */
  readonly fastPath: FastPathSettings | undefined;
}
/** `inboxkit discard` / `inboxkit archive`: an audited act on a selection of one consumer's dead letters. */
export interface RetireCommand extends Common {
  readonly command: 'discard' | 'archive';
  readonly consumer: string;
  /** `--id` (repeatable, or comma-separated). */
  readonly messageIds: readonly string[] | undefined;
  /** `--dead-letter-reason`: a reason group. */
  readonly deadLetterReason: string | undefined;
  readonly since: Date | undefined;
  readonly until: Date | undefined;
  /** `--all`: every dead letter of the consumer. */
  readonly all: boolean;
  readonly limit: number | undefined;
  /** `--reason`: why, for the audit. */
  readonly reason: string;
  readonly requestedBy: string;
  /** `--yes`: do it; without it the command only says what it would do. */
  readonly yes: boolean;
  /** `--transport`/`--from`/`--group` (discard only): the broker DLQ whose copies are removed too. */
  readonly dlq: { readonly transport: TransportName; readonly from: string; readonly group: string | undefined } | undefined;
}
export interface DoctorCommand extends Common {
  readonly command: 'doctor';
  /** Path of a JSON config file with consumer settings. */
  readonly configPath: string | undefined;
  /** Consumer settings given as flags (override the file). */
  readonly settings: Readonly<Record<string, number | string>>;
  readonly transport: TransportName | undefined;
  /** The queue or topic the consumer reads (SQS: its visibility timeout and redrive policy are checked). */
  readonly source: string | undefined;
  /** The DLQ whose existence is checked. */
  readonly dlq: string | undefined;
}

export interface ConsoleCommand extends Common {
  readonly command: 'console';
  /** The DLQs the page lists and replays from (`--dlq TRANSPORT:DLQ`, repeatable). */
  readonly dlqs: readonly { readonly transport: TransportName; readonly name: string }[];
  /** `--bind`; default 127.0.0.1. */
  readonly host: string;
  /** `--port`; default 7070, 0 = any free port. */
  readonly port: number;
  /** The consumers' Redis fast path (`--redis-url`, env `REDIS_URL`): forget deletes an id's entry too. */
  readonly fastPath: FastPathSettings | undefined;
  /** `--allow-remote`: a non-loopback `--bind` is meant. */
  readonly allowRemote: boolean;
  /** `--token-file`: where the credential is (else `INBOXKIT_CONSOLE_TOKEN`). */
  readonly tokenFile: string | undefined;
  /** Who replays are recorded as (`--by`, else $USER), unless the request names a basic-auth user. */
  readonly requestedBy: string;
  /** `--sample-interval`: how often the chart's state counts are read. Default 10 s. */
  readonly sampleIntervalMs: number;
  /** `--schemas MODULE`: the consumers' payload schemas, which edits are checked against. */
  readonly schemasModule: string | undefined;
}

export type ParsedCommand =
  | HelpCommand
  | VersionCommand
  | MigrateCommand
  | StatusCommand
  | PruneCommand
  | PartitionsCommand
  | DlqListCommand
  | DlqReplayCommand
  | DlqEditCommand
  | ForgetCommand
  | RetireCommand
  | DoctorCommand
  | ConsoleCommand;

type Options = NonNullable<ParseArgsConfig['options']>;

const CONNECTION_OPTIONS: Options = {
  'database-url': { type: 'string' },
  schema: { type: 'string' },
  table: { type: 'string' },
  'kafka-brokers': { type: 'string' },
  'kafka-client': { type: 'string' },
  'amqp-url': { type: 'string' },
  'sqs-endpoint': { type: 'string' },
  'nats-url': { type: 'string' },
  region: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

const FILTER_OPTIONS: Options = {
  transport: { type: 'string' },
  from: { type: 'string' },
  group: { type: 'string' },
  consumer: { type: 'string' },
  reason: { type: 'string', multiple: true },
  since: { type: 'string' },
  id: { type: 'string', multiple: true },
  limit: { type: 'string' },
};

const RETIRE_OPTIONS: Options = {
  ...CONNECTION_OPTIONS,
  consumer: { type: 'string' },
  id: { type: 'string', multiple: true },
  'dead-letter-reason': { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  all: { type: 'boolean' },
  limit: { type: 'string' },
  reason: { type: 'string' },
  by: { type: 'string' },
  yes: { type: 'boolean', short: 'y' },
};

/** Consumer settings `doctor` accepts as flags: flag name → kind of value. */
export const DOCTOR_SETTING_FLAGS = {
  'max-attempts': 'count',
  'dedupe-window': 'duration',
  'handler-timeout': 'duration',
  lease: 'duration',
  mode: 'string',
  'backoff-initial': 'duration',
  'backoff-max': 'duration',
  'backoff-multiplier': 'number',
  'sqs-visibility-timeout': 'duration',
  'sqs-max-receive-count': 'count',
  'rabbitmq-delivery-limit': 'count',
} as const;

const OPTIONS: Readonly<Record<CommandName, Options>> = {
  migrate: { ...CONNECTION_OPTIONS, reconciliation: { type: 'boolean' }, layout: { type: 'string' } },
  partitions: {
    ...CONNECTION_OPTIONS,
    ahead: { type: 'string' },
    'dedupe-window': { type: 'string' },
    'lock-timeout': { type: 'string' },
    'dry-run': { type: 'boolean' },
  },
  status: {
    ...CONNECTION_OPTIONS,
    consumer: { type: 'string' },
    'expiring-within': { type: 'string' },
    'dedupe-window': { type: 'string' },
  },
  prune: {
    ...CONNECTION_OPTIONS,
    consumer: { type: 'string' },
    'dry-run': { type: 'boolean' },
    'batch-size': { type: 'string' },
    target: { type: 'string' },
    http: { type: 'boolean' },
    'http-table': { type: 'string' },
    'retired-retention': { type: 'string' },
  },
  'dlq list': { ...CONNECTION_OPTIONS, ...FILTER_OPTIONS, schemas: { type: 'string' } },
  'dlq replay': {
    ...CONNECTION_OPTIONS,
    ...FILTER_OPTIONS,
    to: { type: 'string' },
    rate: { type: 'string' },
    'dry-run': { type: 'boolean' },
    'include-parked': { type: 'boolean' },
    by: { type: 'string' },
    schemas: { type: 'string' },
  },
  'dlq edit': {
    ...CONNECTION_OPTIONS,
    transport: { type: 'string' },
    from: { type: 'string' },
    group: { type: 'string' },
    to: { type: 'string' },
    consumer: { type: 'string' },
    id: { type: 'string' },
    'payload-file': { type: 'string' },
    reason: { type: 'string' },
    schemas: { type: 'string' },
    by: { type: 'string' },
  },
  forget: {
    ...CONNECTION_OPTIONS,
    'redis-url': { type: 'string' },
    'fast-path-prefix': { type: 'string' },
    consumer: { type: 'string' },
    id: { type: 'string' },
    reason: { type: 'string' },
    by: { type: 'string' },
  },
  discard: { ...RETIRE_OPTIONS, transport: { type: 'string' }, from: { type: 'string' }, group: { type: 'string' } },
  archive: RETIRE_OPTIONS,
  doctor: {
    ...CONNECTION_OPTIONS,
    config: { type: 'string' },
    transport: { type: 'string' },
    source: { type: 'string' },
    dlq: { type: 'string' },
    ...Object.fromEntries(Object.keys(DOCTOR_SETTING_FLAGS).map((k) => [k, { type: 'string' as const }])),
  },
  // No --json: the console prints one line (its URL) and serves.
  console: {
    ...Object.fromEntries(Object.entries(CONNECTION_OPTIONS).filter(([name]) => name !== 'json')),
    dlq: { type: 'string', multiple: true },
    bind: { type: 'string' },
    port: { type: 'string' },
    'allow-remote': { type: 'boolean' },
    'token-file': { type: 'string' },
    by: { type: 'string' },
    'sample-interval': { type: 'string' },
    schemas: { type: 'string' },
    'redis-url': { type: 'string' },
    'fast-path-prefix': { type: 'string' },
  },
};

/** The options each command accepts (for usage text and tests). */
export function commandOptions(command: CommandName): readonly string[] {
  return Object.keys(OPTIONS[command]);
}

function describeUnknown(error: unknown, command: CommandName): UsageError {
  const message = error instanceof Error ? error.message : String(error);
  const unknown = /Unknown option '([^']+)'/.exec(message);
  if (unknown) return new UsageError(`unknown flag ${unknown[1]} for \`inboxkit ${command}\``, command);
  const positional = /Unexpected argument '([^']+)'/.exec(message);
  if (positional)
    return new UsageError(
      `unexpected argument ${JSON.stringify(positional[1])} for \`inboxkit ${command}\``,
      command,
    );
  return new UsageError(message.replace(/ To specify a positional argument.*$/s, ''), command);
}

function resolveCommand(argv: readonly string[]): {
  command: CommandName | 'help' | 'version';
  rest: string[];
  topic?: HelpTopic;
} {
  const [first, second, ...others] = argv;
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    const topicWords =
      first === 'help' ? [second, ...others].filter((w): w is string => w !== undefined) : [];
    const topic =
      topicWords.length === 0 ? undefined : topicWords.slice(0, topicWords[0] === 'dlq' ? 2 : 1).join(' ');
    if (topic !== undefined && topic !== 'dlq' && !(COMMANDS as readonly string[]).includes(topic)) {
      throw new UsageError(`no help for unknown command ${JSON.stringify(topic)}`);
    }
    return { command: 'help', rest: [], ...(topic !== undefined ? { topic: topic as HelpTopic } : {}) };
  }
  if (first === '--version' || first === '-v' || first === 'version') return { command: 'version', rest: [] };
  if (first === 'dlq') {
    if (second === undefined || second.startsWith('-')) {
      if (second === '--help' || second === '-h') return { command: 'help', rest: [], topic: 'dlq' };
      throw new UsageError('`inboxkit dlq` needs a subcommand: list, replay or edit');
    }
    const name = `dlq ${second}`;
    if (!(COMMANDS as readonly string[]).includes(name)) {
      throw new UsageError(
        `unknown command \`inboxkit dlq ${second}\`: use \`dlq list\`, \`dlq replay\` or \`dlq edit\``,
      );
    }
    return { command: name as CommandName, rest: others };
  }
  if (!(COMMANDS as readonly string[]).includes(first)) {
    const hint = first.startsWith('-')
      ? 'put the command first, e.g. `inboxkit status --json`'
      : `the commands are ${COMMANDS.join(', ')}`;
    throw new UsageError(`unknown command ${JSON.stringify(first)}: ${hint}`);
  }
  return {
    command: first as CommandName,
    rest: [second, ...others].filter((w): w is string => w !== undefined),
  };
}

function transportOf(
  value: string | undefined,
  command: CommandName,
  required: boolean,
): TransportName | undefined {
  if (value === undefined) {
    if (required)
      throw new UsageError(`\`inboxkit ${command}\` needs --transport kafka|rabbitmq|sqs|nats`, command);
    return undefined;
  }
  if (!(TRANSPORTS as readonly string[]).includes(value)) {
    throw new UsageError(
      `unknown transport ${JSON.stringify(value)}: use --transport kafka, rabbitmq or sqs`,
      command,
    );
  }
  return value as TransportName;
}

function pruneTargetOf(value: string | undefined, http: boolean, command: CommandName): PruneTarget {
  if (value !== undefined && !(PRUNE_TARGETS as readonly string[]).includes(value)) {
    throw new UsageError(
      `unknown prune target ${JSON.stringify(value)}: use --target inbox, http or all`,
      command,
    );
  }
  if (http && value !== undefined && value !== 'http') {
    throw new UsageError(`--http means --target http; it contradicts --target ${value}`, command);
  }
  return http ? 'http' : ((value ?? 'inbox') as PruneTarget);
}

/** `--http-table [SCHEMA.]TABLE`; the schema defaults to the inbox's (`--schema`). */
function httpTableOf(
  value: string | undefined,
  schema: string,
  command: CommandName,
): { schema: string; table: string } {
  if (value === undefined) return { schema, table: 'idempotency_key' };
  const parts = value.split('.');
  if (parts.length > 2 || parts.some((p) => p === '')) {
    throw new UsageError(`--http-table takes TABLE or SCHEMA.TABLE, got ${JSON.stringify(value)}`, command);
  }
  return parts.length === 2 ? { schema: parts[0]!, table: parts[1]! } : { schema, table: parts[0]! };
}

/**
 * Parses argv (without `node` and the script). `env` supplies connection fallbacks and `$USER`; `now` anchors
 * relative times such as `--since 2h`.
 */
export function parseCommandLine(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  now: number,
): ParsedCommand {
  const resolved = resolveCommand(argv);
  if (resolved.command === 'help') return { command: 'help', topic: resolved.topic };
  if (resolved.command === 'version') return { command: 'version' };
  const command = resolved.command;

  let values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  try {
    ({ values } = parseArgs({
      args: resolved.rest,
      options: OPTIONS[command],
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw describeUnknown(error, command);
  }
  if (values.help === true) return { command: 'help', topic: command };
  const str = (name: string): string | undefined => {
    const v = values[name];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v.trim() === '') throw new UsageError(`--${name} needs a value`, command);
    return v;
  };
  const list = (name: string): string[] | undefined => {
    const v = values[name];
    if (v === undefined) return undefined;
    const items = (v as string[])
      .flatMap((s) => s.split(','))
      .map((s) => s.trim())
      .filter(Boolean);
    if (items.length === 0) throw new UsageError(`--${name} needs a value`, command);
    return items;
  };
  /** `--redis-url` (env `REDIS_URL`) and `--fast-path-prefix` (env `INBOXKIT_FAST_PATH_PREFIX`), for forget. */
  const fastPathOf = (): FastPathSettings | undefined => {
    const redisUrl = str('redis-url') ?? nonEmptyValue(env.REDIS_URL);
    const keyPrefix =
      str('fast-path-prefix') ?? nonEmptyValue(env.INBOXKIT_FAST_PATH_PREFIX) ?? 'inboxkit:fp:';
    if (redisUrl === undefined && values['fast-path-prefix'] !== undefined)
      throw new UsageError(
        '--fast-path-prefix needs --redis-url (or REDIS_URL): the Redis of the fast path',
        command,
      );
    return redisUrl === undefined ? undefined : { redisUrl, keyPrefix };
  };
  const connection = (() => {
    try {
      return resolveConnectionSettings(values, env);
    } catch (error) {
      if (error instanceof UnknownKafkaClientError) throw new UsageError(error.message, command);
      throw error;
    }
  })();
  const common: Common = {
    connection,
    json: values.json === true,
  };

  switch (command) {
    case 'migrate': {
      const layout = str('layout') ?? 'table';
      if (layout !== 'table' && layout !== 'daily-partitions') {
        throw new UsageError(
          `unknown layout ${JSON.stringify(layout)}: use --layout table or --layout daily-partitions`,
          command,
        );
      }
      return { command, ...common, reconciliation: values.reconciliation === true, layout };
    }
    case 'partitions': {
      const ahead = str('ahead');
      const window = str('dedupe-window');
      const lockTimeout = str('lock-timeout');
      return {
        command,
        ...common,
        aheadDays: ahead === undefined ? 3 : parsePositiveInt(ahead, '--ahead', command),
        dedupeWindowMs:
          window === undefined ? 7 * 86_400_000 : parseDuration(window, '--dedupe-window', command),
        lockTimeoutMs:
          lockTimeout === undefined ? 2_000 : parseDuration(lockTimeout, '--lock-timeout', command),
        dryRun: values['dry-run'] === true,
      };
    }
    case 'status': {
      const window = str('dedupe-window');
      const expiring = str('expiring-within');
      return {
        command,
        ...common,
        consumer: str('consumer'),
        expiringWithinMs:
          expiring === undefined ? 3_600_000 : parseDuration(expiring, '--expiring-within', command),
        dedupeWindowMs:
          window === undefined ? 7 * 86_400_000 : parseDuration(window, '--dedupe-window', command),
      };
    }
    case 'prune': {
      const batch = str('batch-size');
      const target = pruneTargetOf(str('target'), values.http === true, command);
      const consumer = str('consumer');
      if (consumer !== undefined && target === 'http') {
        throw new UsageError(
          '--consumer selects inbox rows; idempotency keys have no consumer (drop --consumer, or use --target all)',
          command,
        );
      }
      const retention = str('retired-retention');
      if (retention !== undefined && target === 'http') {
        throw new UsageError('--retired-retention applies to inbox rows (drop it, or use --target all)', command);
      }
      const httpTable = str('http-table');
      if (httpTable !== undefined && target === 'inbox') {
        throw new UsageError('--http-table needs --target http or --target all (or --http)', command);
      }
      return {
        command,
        ...common,
        target,
        consumer,
        dryRun: values['dry-run'] === true,
        batchSize: batch === undefined ? 5_000 : parsePositiveInt(batch, '--batch-size', command),
        retiredRetentionMs: retention === undefined ? 30 * 86_400_000 : parseDuration(retention, '--retired-retention', command),
        httpTable: httpTableOf(httpTable, common.connection.schema, command),
      };
    }
    case 'dlq list':
    case 'dlq replay': {
      const transport = transportOf(str('transport'), command, true)!;
      const from = str('from');
      if (from === undefined) {
        throw new UsageError(
          `\`inboxkit ${command}\` needs --from DLQ (the dead-letter topic, queue name or queue URL)`,
          command,
        );
      }
      const since = str('since');
      const limit = str('limit');
      const filter: DeadLetterFilter = {
        consumer: str('consumer'),
        reasons: list('reason'),
        since: since === undefined ? undefined : parseSince(since, now, '--since', command),
        ids: list('id'),
      };
      const dlq = { ...common, transport, from, filter, group: str('group') };
      if (dlq.group !== undefined && transport !== 'kafka') {
        throw new UsageError(
          '--group applies to --transport kafka only (the consumer group of the DLQ topic)',
          command,
        );
      }
      if (command === 'dlq list') {
        return {
          command,
          ...dlq,
          limit: limit === undefined ? 1_000 : parsePositiveInt(limit, '--limit', command),
          schemasModule: str('schemas'),
        };
      }
      const rate = str('rate');
      const by = str('by') ?? env.USER ?? env.USERNAME ?? env.LOGNAME;
      return {
        command,
        ...dlq,
        to: str('to'),
        limit: limit === undefined ? undefined : parsePositiveInt(limit, '--limit', command),
        ratePerSecond: rate === undefined ? undefined : parseRate(rate, '--rate', command),
        dryRun: values['dry-run'] === true,
        includeParked: values['include-parked'] === true,
        requestedBy: by === undefined || by.trim() === '' ? 'unknown' : by,
        schemasModule: str('schemas'),
      };
    }
    case 'dlq edit':
    case 'forget': {
      const need = (name: string, what: string): string => {
        const v = str(name);
        if (v === undefined) throw new UsageError(`\`inboxkit ${command}\` needs --${name} ${what}`, command);
        return v;
      };
      const by = str('by') ?? env.USER ?? env.USERNAME ?? env.LOGNAME;
      const act = {
        ...common,
        consumer: need('consumer', 'NAME'),
        messageId: need('id', 'ID'),
        reason: need('reason', 'TEXT (why, for the audit)'),
        requestedBy: by === undefined || by.trim() === '' ? 'unknown' : by,
      };
      if (command === 'forget') return { command, ...act, fastPath: fastPathOf() };
      const transport = transportOf(str('transport'), command, true)!;
      const group = str('group');
      if (group !== undefined && transport !== 'kafka') {
        throw new UsageError(
          '--group applies to --transport kafka only (the consumer group of the DLQ topic)',
          command,
        );
      }
      return {
        command,
        ...act,
        transport,
        from: need('from', 'DLQ (the dead-letter topic, queue name or queue URL)'),
        group,
        to: str('to'),
        payloadFile: need('payload-file', 'FILE (the corrected payload; - reads stdin)'),
        schemasModule: str('schemas'),
      };
    }
    case 'discard':
    case 'archive': {
      const consumer = str('consumer');
      if (consumer === undefined) throw new UsageError(`\`inboxkit ${command}\` needs --consumer NAME`, command);
      const reason = str('reason');
      if (reason === undefined || reason.trim() === '') {
        throw new UsageError(`\`inboxkit ${command}\` needs --reason TEXT (why, for the audit)`, command);
      }
      const since = str('since');
      const until = str('until');
      const limit = str('limit');
      const messageIds = list('id');
      const deadLetterReason = str('dead-letter-reason');
      const all = values.all === true;
      const narrowed = messageIds !== undefined || deadLetterReason !== undefined || since !== undefined || until !== undefined;
      if (!narrowed && !all) {
        throw new UsageError(
          `select the dead letters to ${command}: --id ID, --dead-letter-reason REASON, --since/--until, or --all for every one of the consumer`,
          command,
        );
      }
      if (all && narrowed) throw new UsageError('--all selects every dead letter of the consumer: drop it, or drop the other filters', command);
      const transport = transportOf(str('transport'), command, false);
      const from = str('from');
      if ((transport === undefined) !== (from === undefined)) {
        throw new UsageError('--transport and --from go together: the broker DLQ whose copies are removed too', command);
      }
      const group = str('group');
      if (group !== undefined && transport !== 'kafka') {
        throw new UsageError('--group applies to --transport kafka only (the consumer group of the DLQ topic)', command);
      }
      const by = str('by') ?? env.USER ?? env.USERNAME ?? env.LOGNAME;
      return {
        command,
        ...common,
        consumer,
        messageIds,
        deadLetterReason,
        since: since === undefined ? undefined : parseSince(since, now, '--since', command),
        until: until === undefined ? undefined : parseSince(until, now, '--until', command),
        all,
        limit: limit === undefined ? undefined : parsePositiveInt(limit, '--limit', command),
        reason,
        requestedBy: by === undefined || by.trim() === '' ? 'unknown' : by,
        yes: values.yes === true,
        dlq: transport === undefined || from === undefined ? undefined : { transport, from, group },
      };
    }
    case 'console': {
      const dlqs = ((values.dlq as string[] | undefined) ?? []).map((value) => {
        const colon = value.indexOf(':');
        const transport = colon < 0 ? '' : value.slice(0, colon);
        const name = colon < 0 ? '' : value.slice(colon + 1).trim();
        if (!(TRANSPORTS as readonly string[]).includes(transport) || name === '') {
          throw new UsageError(
            `--dlq takes TRANSPORT:DLQ with TRANSPORT one of ${TRANSPORTS.join(', ')} (rabbitmq:orders.dlq), got ${JSON.stringify(value)}`,
            command,
          );
        }
        return { transport: transport as TransportName, name };
      });
      const port = str('port');
      const portNumber = port === undefined ? 7070 : /^\d+$/.test(port.trim()) ? Number(port) : Number.NaN;
      if (!Number.isInteger(portNumber) || portNumber < 0 || portNumber > 65_535) {
        throw new UsageError(
          `--port expects a port number from 0 to 65535, got ${JSON.stringify(port)}`,
          command,
        );
      }
      const interval = str('sample-interval');
      const by = str('by') ?? env.USER ?? env.USERNAME ?? env.LOGNAME;
      return {
        command,
        ...common,
        dlqs,
        host: str('bind') ?? '127.0.0.1',
        port: portNumber,
        allowRemote: values['allow-remote'] === true,
        tokenFile: str('token-file'),
        schemasModule: str('schemas'),
        requestedBy: by === undefined || by.trim() === '' ? 'unknown' : by,
        fastPath: fastPathOf(),
        sampleIntervalMs:
          interval === undefined ? 10_000 : parseDuration(interval, '--sample-interval', command),
      };
    }
    case 'doctor': {
      const settings: Record<string, number | string> = {};
      for (const [flag, kind] of Object.entries(DOCTOR_SETTING_FLAGS)) {
        const v = str(flag);
        if (v === undefined) continue;
        if (kind === 'duration') settings[flag] = parseDuration(v, `--${flag}`, command);
        else if (kind === 'count') settings[flag] = parsePositiveInt(v, `--${flag}`, command);
        else if (kind === 'number') {
          const n = Number(v);
          if (!Number.isFinite(n) || n <= 0)
            throw new UsageError(`--${flag} expects a positive number, got ${JSON.stringify(v)}`, command);
          settings[flag] = n;
        } else settings[flag] = v;
      }
      if ((values.source !== undefined || values.dlq !== undefined) && values.transport === undefined) {
        throw new UsageError('--source and --dlq need --transport kafka|rabbitmq|sqs|nats', command);
      }
      return {
        command,
        ...common,
        configPath: str('config'),
        settings,
        transport: transportOf(str('transport'), command, false),
        source: str('source'),
        dlq: str('dlq'),
      };
    }
  }
}

/** An environment variable's value, or undefined when unset or blank. */
function nonEmptyValue(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}
