// The help text of every command: printed by `inboxkit help [command]`, `--help`, and after a usage error.

import { COMMANDS, type CommandName, type HelpTopic } from './command-line.js';

const CONNECTION = `Connection (flag, else environment variable):
  --database-url URL      Postgres URL                        DATABASE_URL
  --schema NAME           schema of the inbox table           INBOXKIT_SCHEMA (default inboxkit)
  --table NAME            name of the inbox table             INBOXKIT_TABLE (default inbox)
  --kafka-brokers LIST    host:port,host:port                 KAFKA_BROKERS
  --kafka-client NAME     kafkajs or platformatic             INBOXKIT_KAFKA_CLIENT
                          (default kafkajs if installed, else @platformatic/kafka)
  --amqp-url URL          RabbitMQ URL                        AMQP_URL
  --sqs-endpoint URL      SQS endpoint (ElasticMQ/LocalStack) SQS_ENDPOINT (default AWS)
  --region REGION         AWS region                          AWS_REGION (default us-east-1)
  --nats-url URL          NATS server (JetStream)             NATS_URL
Passwords in URLs are never printed.`;

const OVERVIEW = `inboxkit — operate the inboxkit inbox and its dead-letter queues

Usage: inboxkit <command> [flags]

Commands:
  migrate       apply the inbox schema (the same migrations as @inboxkit/core)
  status        inbox rows by consumer and status, leases, dead letters, expiry
  prune         delete expired completed rows (and HTTP idempotency keys) in batches
  partitions    make the days ahead and drop expired days of a partitioned inbox
  dlq list      what sits in a DLQ, grouped by reason and error, with inbox status
  dlq replay    move dead letters back to their source, safely (see docs/cli.md)
  dlq edit      replay one dead letter with a corrected payload (audited)
  forget        delete one completed inbox row on purpose (audited)
  discard       retire dead letters for good: never run, audited (and out of a DLQ)
  archive       keep dead letters as a record, out of the live views (audited)
  doctor        check connectivity and configuration invariants
  console       a web page over the inbox and the DLQs: charts, filters, replay
  help [cmd]    show help for a command (also: <command> --help)
  --version     print the version

Exit codes: 0 ok, 1 something failed (see output), 2 usage error,
            3 could not run (connection or configuration), 130 interrupted.

${CONNECTION}
`;

const COMMAND_USAGE: Readonly<Record<CommandName, string>> = {
  console: `Usage: inboxkit console [--dlq TRANSPORT:DLQ]… [--bind 127.0.0.1] [--port 7070]
                        [--allow-remote] [--token-file FILE] [--by NAME]
                        [--sample-interval 10s] [--schemas MODULE]
                        [--redis-url URL [--fast-path-prefix P]]
                        [connection flags]

Serves the operator console: per consumer, rows by state over time and dead
letters per hour; the dead letters of each --dlq grouped by reason, with
filters (consumer, reason, time, id or error text); one message's full record;
dry-run and replay of a selection, at a rate, with live progress. Replays take
the path of \`dlq replay\`: publish, confirm, then remove; the inbox decides.

  --dlq T:DLQ        a DLQ to list and replay from (repeat for several):
                     kafka:orders-dlq, rabbitmq:orders.dlq, sqs:orders-dlq
  --bind HOST        listen here (default 127.0.0.1). Any other address needs
                     --allow-remote and a credential
  --port N           default 7070; 0 picks a free port
  --token-file FILE  the credential (else INBOXKIT_CONSOLE_TOKEN), at least 16
                     characters; every request must then carry it (basic auth:
                     any user name, the credential as password; or Bearer).
                     It is never printed
  --by NAME          who replays are recorded as (default $USER); a basic-auth
                     user name takes its place
  --sample-interval  how often the chart's counts are read (default 10s)
  --schemas MODULE   a module exporting \`schemas\` (payload schemas by consumer
                     name): edits from the page are checked against them, and
                     \`fingerprints\` (the consumers' fingerprint options), if any
  --redis-url URL    the consumers' fast-path Redis (env REDIS_URL): forgetting
                     an id on the page deletes its fast-path entry too
  --fast-path-prefix P  the consumers' keyPrefix (env
                     INBOXKIT_FAST_PATH_PREFIX; default inboxkit:fp:)`,
  migrate: `Usage: inboxkit migrate [--layout table|daily-partitions] [--reconciliation]
                        [connection flags] [--json]

Creates or updates the inbox table (schema --schema, table --table) with the
migrations of @inboxkit/core. Safe to run repeatedly and from several hosts.

--layout daily-partitions makes the inbox range-partitioned by the UTC day of
each intent's own time (the consumer's dayOf, CloudEvents time, else the
message timestamp), expired by dropping a day instead of deleting rows
(docs/operations.md, "Partitioning for high volume"); then run
\`inboxkit partitions\` at least daily. An empty plain inbox is converted; a
populated one is refused (the same page gives the procedure). Default table.

--reconciliation also creates the tables of the reconciliation sweeper
(@inboxkit/core/patterns: reconciliation_watermarks, reconciliation_differences)
in the same schema. Only applications that run a sweeper need them.`,
  status: `Usage: inboxkit status [--consumer NAME] [--expiring-within 1h]
                       [--dedupe-window 7d] [--json] [connection flags]

Per consumer: rows by status, the oldest processing row and whether its lease
expired, dead letters by reason, rows expiring within --expiring-within
(default 1h), and the age of the oldest row against the dedupe window
(--dedupe-window, default 7d).`,
  prune: `Usage: inboxkit prune [--consumer NAME] [--dry-run] [--batch-size 5000]
                      [--retired-retention 30d] [--target inbox|http|all] [--http]
                      [--http-table [SCHEMA.]TABLE] [--json] [connection flags]

Deletes completed rows whose expires_at has passed, in batches, then the dead
letters an operator discarded or archived more than --retired-retention ago
(default 30d; their audit lines stay). Rows that are processing, failed or
dead-lettered are never pruned. --dry-run counts what would be deleted and
deletes nothing.

--target http (or --http) prunes the HTTP idempotency keys of @inboxkit/http
instead: keys whose retention passed, never one under a live lease. Their table
is --http-table (default <--schema>.idempotency_key). --target all prunes both.`,
  partitions: `Usage: inboxkit partitions [--ahead 3] [--dedupe-window 7d]
                           [--lock-timeout 2s] [--dry-run] [--json]
                           [connection flags]

Partition maintenance of a partitioned inbox (layout daily-partitions, see migrate):
makes the days from the start of the dedupe window to --ahead days ahead (UTC),
and drops the days wholly older than --dedupe-window (set it to the largest
dedupeWindowMs of the consumers on this inbox). A day whose completed rows are
not all expired is kept; rows still processing, failed or dead-lettered move to
the default partition, where their redeliveries find them. The plain tables of
an inbox moved while populated (<table>_legacy) are dropped once every completed
row in them expired, their open rows moved in. Each day is one
transaction with a --lock-timeout; one past it is left for the next run. Each
step is printed as it happens. One runner at a time across hosts: a second
exits 1 saying so. --dry-run says what would be done. Run it at least daily
(cron), or call startPartitionMaintenance() in a service.`,
  'dlq list': `Usage: inboxkit dlq list --transport kafka|rabbitmq|sqs|nats --from DLQ
                         [--consumer NAME] [--reason R]… [--since T] [--id ID]…
                         [--limit 1000] [--schemas MODULE] [--group G] [--json]
                         [connection flags]

Shows what sits in a DLQ, grouped by consumer, reason and error, with the inbox
status of each message id and what a replay would do. Kafka and NATS are read
without touching anything. SQS and RabbitMQ cannot peek: listing receives and releases
each message (receive counts rise; order may change) and the output says so.

  --schemas MODULE  a module exporting \`fingerprints\` (the consumers' fingerprint
                    options by consumer name): a payload-mismatch dead letter is
                    fingerprinted as its consumer does (default: whole payload)`,
  'dlq replay': `Usage: inboxkit dlq replay --transport kafka|rabbitmq|sqs|nats --from DLQ
                           [--to SOURCE] [--consumer NAME] [--reason R]…
                           [--since T] [--id ID]… [--limit N] [--rate N/s]
                           [--dry-run] [--include-parked] [--by NAME]
                           [--schemas MODULE] [--group G] [--json]
                           [connection flags]

Publishes each selected dead letter back to its source with its original
message id and a replay marker (replay id, --by or $USER), waits for the
broker's confirmation, then removes it from the DLQ. The inbox then skips ids
already completed and reopens dead-lettered ones once. Unselected dead letters
stay in the DLQ. Interrupted runs lose nothing; run the same command again.

  --to SOURCE     publish here instead of the recorded source (Kafka topic,
                  RabbitMQ queue, SQS queue URL or name)
  --reason R      only this reason (repeat or comma-separate for several)
  --since T       only dead-lettered at/after T: ISO time or a duration ago (6h)
  --id ID         only these message ids (repeat or comma-separate)
  --limit N       replay at most N dead letters
  --rate N/s      at most N publishes per second (50, 50/s, 600/m)
  --dry-run       read the inbox and say per message what would happen;
                  publish nothing, remove nothing
  --include-parked  replay parked dead letters too: those a replay already
                  reopened and that failed again (left in the DLQ otherwise,
                  so one bad message cannot loop a bulk replay)
  --schemas MODULE  a module exporting \`fingerprints\` (the consumers' fingerprint
                  options by consumer name): the payload-mismatch prediction
                  fingerprints as the consumer does (default: whole payload)
  --group G       Kafka: consumer group that tracks replay progress on the DLQ
                  topic (default inboxkit-dlq-replay.<DLQ>)`,
  'dlq edit': `Usage: inboxkit dlq edit --transport kafka|rabbitmq|sqs|nats --from DLQ
                         --consumer NAME --id ID --payload-file FILE|-
                         --reason TEXT [--schemas MODULE] [--to SOURCE]
                         [--by NAME] [--group G] [--json] [connection flags]

Edit and retry: replays one dead letter with a corrected payload under its own
message id. The payload is checked first (JSON, then the consumer's schema
from --schemas) and refused with the schema's message before anything is
written or published. Then, with the DLQ copy in hand, the inbox row is
amended to the new payload's fingerprint and the act audited (who, when, old
and new fingerprints, --reason); the corrected copy is published with a
replay marker and the DLQ copy removed. The consumer applies it once; the old
payload, or another one sent without this act, stays payload-mismatch.

  --payload-file F  the corrected payload (JSON); - reads stdin
  --reason TEXT     why, for the audit (required)
  --schemas MODULE  a module exporting \`schemas\`: payload schemas by consumer
                    name (the ones the consumers use), and \`fingerprints\`:
                    their fingerprint options, for a consumer that has one
  --to SOURCE       publish here instead of the recorded source
  --by NAME         who asked (default $USER)
  --group G         Kafka: consumer group that tracks the DLQ topic`,
  forget: `Usage: inboxkit forget --consumer NAME --id ID --reason TEXT [--by NAME]
                       [--redis-url URL [--fast-path-prefix P]]
                       [--json] [connection flags]

Forget one id: deletes its completed inbox row on purpose, audited (who, when,
the fingerprint it had, --reason), so its next delivery is processed as new.
Rows in any other state are left alone (exit 1). When the consumers use a
Redis fast path, pass --redis-url: the id's fast-path entry is deleted too
(Redis is reached first; if it cannot be, nothing is forgotten). Without it,
the fast path answers the id's deliveries duplicate for up to the dedupe
window.

  --reason TEXT          why, for the audit (required)
  --by NAME              who asked (default $USER)
  --redis-url URL        the consumers' fast-path Redis (env REDIS_URL)
  --fast-path-prefix P   the consumers' keyPrefix (env
                         INBOXKIT_FAST_PATH_PREFIX; default inboxkit:fp:)`,
  discard: `Usage: inboxkit discard --consumer NAME (--id ID… | --dead-letter-reason R |
                        --since T | --until T | --all) --reason TEXT [--limit N]
                        [--by NAME] [--yes] [--transport T --from DLQ [--group G]]
                        [--json] [connection flags]

Discards dead letters of one consumer: each selected dead-lettered (or
archived) inbox row becomes discarded, with an audit line (who, why, when, its
state and dead-letter reason before) written in the same transaction. A
discarded message never runs: a redelivery or replay of its id is acked as a
duplicate (reason discarded) until \`inboxkit prune\` deletes the row after
its retention (default 30 days). Without --yes, says what it would discard and
changes nothing (exit 1). With --transport and --from, the discarded dead
letters' copies are then removed from that broker DLQ, and copies the inbox
holds no live row for (payload mismatch, late messages) are audited and
removed too; every other copy is left in place. Safe to rerun.

  --id ID               these ids (repeat, or comma-separated)
  --dead-letter-reason R  a reason group (max-attempts, payload-mismatch …)
  --since T / --until T dead-lettered in [T, T') (ISO time or a duration ago: 6h)
  --all                 every dead letter of the consumer
  --reason TEXT         why, for the audit (required)
  --by NAME             who asked (default $USER)
  --yes, -y             do it (default: only say what would be done)
  --transport T --from DLQ  the broker DLQ to remove their copies from
  --group G             Kafka: consumer group that tracks the DLQ topic`,
  archive: `Usage: inboxkit archive --consumer NAME (--id ID… | --dead-letter-reason R |
                        --since T | --until T | --all) --reason TEXT [--limit N]
                        [--by NAME] [--yes] [--json] [connection flags]

Archives dead letters of one consumer: each selected dead-lettered inbox row
becomes archived — kept with its details as a record, out of the live views
(dlq lists, status dead letters, the DLQ gauges), its redeliveries acked as
duplicates (reason archived) — with an audit line in the same transaction.
\`inboxkit prune\` deletes archived rows after their retention (default 30
days); \`inboxkit discard\` discards an archived one. Broker DLQ copies stay
(the inbox keeps no payload). Without --yes, says what it would archive and
changes nothing (exit 1). Flags as for discard.`,
  doctor: `Usage: inboxkit doctor [--config FILE] [--transport T [--source Q] [--dlq Q]]
                       [--max-attempts N] [--dedupe-window D] [--handler-timeout D]
                       [--lease D] [--mode transactional|leased]
                       [--backoff-initial D] [--backoff-max D] [--backoff-multiplier X]
                       [--sqs-visibility-timeout D] [--sqs-max-receive-count N]
                       [--rabbitmq-delivery-limit N] [--json] [connection flags]

Checks every configured service (Postgres, Kafka, RabbitMQ, SQS) and the inbox
table; with --transport, that --source (the consumed queue or topic) and --dlq
exist (SQS: the source's VisibilityTimeout and redrive maxReceiveCount feed the
checks below). Then the configuration invariants: dedupe window vs retry horizon,
lease vs handler timeout, broker redelivery limits vs max attempts, SQS
visibility vs handler timeout. Settings come from --config (JSON with the
same names in camelCase, e.g. {"maxAttempts": 5, "dedupeWindow": "7d"}) and
flags; unset ones take the @inboxkit/core defaults. Each problem says what to
change. Exit code 1 when any check fails.`,
};

/**
 * The overview, or the usage of one command followed by the connection flags (left out with
 * `brief`, as after a usage error).
 */
export function usage(command?: HelpTopic, brief = false): string {
  if (command === undefined) return brief ? `${OVERVIEW.split('\n\nConnection')[0]}\n` : OVERVIEW;
  if (command === 'dlq') {
    const all = COMMANDS.filter((name) => name.startsWith('dlq '))
      .map((name) => COMMAND_USAGE[name])
      .join('\n\n');
    return brief ? `${all}\n\nConnection flags: inboxkit help dlq\n` : `${all}\n\n${CONNECTION}\n`;
  }
  return brief
    ? `${COMMAND_USAGE[command]}\n\nConnection flags: inboxkit help ${command}\n`
    : `${COMMAND_USAGE[command]}\n\n${CONNECTION}\n`;
}
