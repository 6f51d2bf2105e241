// Connectivity checks of `inboxkit doctor`: one per configured service, each with a time limit, none
// printing a secret. A service that is not configured is skipped, not failed.

import { sql } from 'kysely';

import type { CliServices } from '../cli-services.js';
import type { TransportName } from '../command-line.js';
import type { ConnectionSettings } from '../settings/connection-settings.js';
import { maskConnectionString } from '../settings/mask-connection-string.js';
import type { SecretScrubber } from '../settings/secret-scrubber.js';
import { secretScrubber } from '../settings/secret-scrubber.js';
import type { DoctorCheck } from './config-invariants.js';
import { checkPartitions } from './partition-check.js';

/** What the probes look at besides the connection settings. */
export interface ProbeOptions {
  readonly transport?: TransportName | undefined;
  /** The consumed queue/topic to check. */
  readonly source?: string | undefined;
  /** The DLQ to check. */
  readonly dlq?: string | undefined;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Per probe. Default is 10,000 ms. */
  readonly timeoutMs?: number | undefined;
}

/** Broker facts the probes read that feed the configuration checks. */
export interface ProbedLimits {
  sqsVisibilityTimeoutMs?: number;
  sqsMaxReceiveCount?: number;
}

/** Columns the CLI and core rely on, to tell an old (version 1: run `migrate`) or foreign table from the inbox. */
const REQUIRED_COLUMNS = ['consumer', 'message_id', 'status', 'attempts', 'expires_at', 'changed_at'];

async function within<T>(ms: number, what: string, work: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms from ${what}`)), ms);
  });
  try {
    return await Promise.race([work(), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function failure(name: string, error: unknown, fix: string, secrets: SecretScrubber): DoctorCheck {
  const message = error instanceof Error ? error.message || error.name : String(error);
  return { name, status: 'fail', detail: secrets.scrub(message), fix };
}

async function probePostgres(
  settings: ConnectionSettings,
  services: CliServices,
  ms: number,
  secrets: SecretScrubber,
): Promise<DoctorCheck[]> {
  const name = 'postgres';
  if (settings.databaseUrl === undefined) {
    return [
      { name, status: 'skip', detail: 'not configured', fix: 'pass --database-url or set DATABASE_URL' },
    ];
  }
  const where = maskConnectionString(settings.databaseUrl);
  let database;
  try {
    database = await services.openDatabase(settings);
    const db = database.db;
    const { rows } = await within(ms, where, () =>
      sql<{ version: string }>`select current_setting('server_version') as version`.execute(db),
    );
    const checks: DoctorCheck[] = [
      { name, status: 'ok', detail: `${where}: PostgreSQL ${rows[0]?.version ?? '?'}` },
    ];
    const table = `${settings.schema}.${settings.table}`;
    const { rows: cols } = await within(ms, where, () =>
      sql<{
        column_name: string;
      }>`select column_name from information_schema.columns where table_schema = ${settings.schema} and table_name = ${settings.table}`.execute(
        db,
      ),
    );
    const present = new Set(cols.map((c) => c.column_name));
    const missing = REQUIRED_COLUMNS.filter((c) => !present.has(c));
    if (cols.length === 0) {
      checks.push({
        name: 'inbox table',
        status: 'fail',
        detail: `${table} does not exist`,
        fix: 'run `inboxkit migrate` (or check --schema/--table)',
      });
    } else if (missing.length > 0) {
      checks.push({
        name: 'inbox table',
        status: 'fail',
        detail: `${table} lacks ${missing.join(', ')}`,
        fix: 'run `inboxkit migrate`, or point --table at the inbox table',
      });
    } else {
      checks.push({ name: 'inbox table', status: 'ok', detail: `${table} present` });
      checks.push(...(await within(ms, where, () => checkPartitions(db, settings.schema, settings.table))));
    }
    return checks;
  } catch (error) {
    return [
      failure(name, error, `check that Postgres at ${where} is up and the credentials are right`, secrets),
    ];
  } finally {
    await database?.close().catch(() => undefined);
  }
}

async function probeKafka(
  settings: ConnectionSettings,
  options: ProbeOptions,
  ms: number,
  secrets: SecretScrubber,
): Promise<DoctorCheck[]> {
  const name = 'kafka';
  if (settings.kafkaBrokers === undefined) {
    return [
      {
        name,
        status: options.transport === 'kafka' ? 'fail' : 'skip',
        detail: 'not configured',
        fix: 'pass --kafka-brokers or set KAFKA_BROKERS',
      },
    ];
  }
  const { kafkaClientFor } = await import('../transports/open-kafka.js');
  let kafka: Awaited<ReturnType<typeof kafkaClientFor>> | undefined;
  try {
    kafka = await kafkaClientFor(settings);
    const cluster = kafka;
    const checks: DoctorCheck[] = [];
    const brokers = await within(ms, settings.kafkaBrokers.join(','), () => cluster.brokerCount());
    checks.push({
      name,
      status: 'ok',
      detail: `${settings.kafkaBrokers.join(',')}: ${brokers} broker(s) (${kafka.clientName})`,
    });
    if (options.transport === 'kafka') {
      const topics = await within(ms, 'kafka', () => cluster.listTopics());
      for (const [role, topic] of [
        ['source topic', options.source],
        ['DLQ topic', options.dlq],
      ] as const) {
        if (topic === undefined) continue;
        checks.push(
          topics.includes(topic)
            ? { name: `kafka ${role}`, status: 'ok', detail: `${topic} exists` }
            : {
                name: `kafka ${role}`,
                status: 'fail',
                detail: `${topic} does not exist`,
                fix: `create the topic ${topic} (the consumers do not create it)`,
              },
        );
      }
    }
    return checks;
  } catch (error) {
    return [
      failure(name, error, `check that Kafka at ${settings.kafkaBrokers.join(',')} is reachable`, secrets),
    ];
  } finally {
    await kafka?.close().catch(() => undefined);
  }
}

async function probeRabbitmq(
  settings: ConnectionSettings,
  options: ProbeOptions,
  ms: number,
  secrets: SecretScrubber,
): Promise<DoctorCheck[]> {
  const name = 'rabbitmq';
  if (settings.amqpUrl === undefined) {
    return [
      {
        name,
        status: options.transport === 'rabbitmq' ? 'fail' : 'skip',
        detail: 'not configured',
        fix: 'pass --amqp-url or set AMQP_URL',
      },
    ];
  }
  const where = maskConnectionString(settings.amqpUrl);
  const { connectAmqp } = await import('../transports/open-rabbitmq.js');
  let connection;
  try {
    connection = await within(ms, where, () => connectAmqp(settings));
    const checks: DoctorCheck[] = [{ name, status: 'ok', detail: `${where}: connected` }];
    if (options.transport === 'rabbitmq') {
      for (const [role, queue] of [
        ['source queue', options.source],
        ['DLQ', options.dlq],
      ] as const) {
        if (queue === undefined) continue;
        // A failed checkQueue closes the channel: one channel per check.
        const channel = await connection.createChannel();
        channel.on('error', () => undefined);
        try {
          const q = await within(ms, where, () => channel.checkQueue(queue));
          checks.push({
            name: `rabbitmq ${role}`,
            status: 'ok',
            detail: `${queue}: ${q.messageCount} ready, ${q.consumerCount} consumer(s)`,
          });
          await channel.close().catch(() => undefined);
        } catch {
          checks.push({
            name: `rabbitmq ${role}`,
            status: 'fail',
            detail: `${queue} does not exist`,
            fix: `declare ${queue} (declareTopology() of @inboxkit/rabbitmq does)`,
          });
        }
      }
    }
    return checks;
  } catch (error) {
    return [
      failure(name, error, `check that RabbitMQ at ${where} is up and the credentials are right`, secrets),
    ];
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

async function probeSqs(
  settings: ConnectionSettings,
  options: ProbeOptions,
  ms: number,
  limits: ProbedLimits,
  secrets: SecretScrubber,
): Promise<DoctorCheck[]> {
  const name = 'sqs';
  if (settings.sqsEndpoint === undefined && options.transport !== 'sqs') {
    return [
      {
        name,
        status: 'skip',
        detail: 'not configured',
        fix: 'pass --sqs-endpoint (local) or --transport sqs (AWS)',
      },
    ];
  }
  const { GetQueueAttributesCommand, ListQueuesCommand } = await import('@aws-sdk/client-sqs');
  const { sqsClientFor, sqsQueueUrl } = await import('../transports/open-sqs.js');
  const client = sqsClientFor(settings, options.env);
  const where =
    settings.sqsEndpoint === undefined
      ? `AWS ${settings.region}`
      : maskConnectionString(settings.sqsEndpoint);
  try {
    await within(ms, where, () => client.send(new ListQueuesCommand({ MaxResults: 1 })));
    const checks: DoctorCheck[] = [{ name, status: 'ok', detail: `${where}: reachable` }];
    if (options.transport === 'sqs') {
      for (const [role, queue] of [
        ['source queue', options.source],
        ['DLQ', options.dlq],
      ] as const) {
        if (queue === undefined) continue;
        try {
          const url = await within(ms, where, () => sqsQueueUrl(client, queue));
          const { Attributes: a = {} } = await within(ms, where, () =>
            client.send(
              new GetQueueAttributesCommand({
                QueueUrl: url,
                AttributeNames: ['VisibilityTimeout', 'RedrivePolicy'],
              }),
            ),
          );
          let detail = `${queue} exists`;
          if (role === 'source queue') {
            const visibility = Number(a.VisibilityTimeout);
            if (Number.isFinite(visibility)) limits.sqsVisibilityTimeoutMs = visibility * 1000;
            try {
              const n = Number(
                (JSON.parse(a.RedrivePolicy ?? '{}') as { maxReceiveCount?: unknown }).maxReceiveCount,
              );
              if (Number.isInteger(n) && n > 0) limits.sqsMaxReceiveCount = n;
            } catch {
              // unreadable policy: reported as missing below
            }
            detail += `, VisibilityTimeout ${a.VisibilityTimeout ?? '?'} s, ${limits.sqsMaxReceiveCount === undefined ? 'no redrive policy' : `maxReceiveCount ${limits.sqsMaxReceiveCount}`}`;
            if (limits.sqsMaxReceiveCount === undefined) {
              checks.push({
                name: `sqs ${role}`,
                status: 'warn',
                detail,
                fix: 'set a RedrivePolicy (redrivePolicyFor() of @inboxkit/sqs) so a message that crashes the process every time still ends in the DLQ',
              });
              continue;
            }
          }
          checks.push({ name: `sqs ${role}`, status: 'ok', detail });
        } catch (error) {
          checks.push(failure(`sqs ${role}`, error, `create ${queue} or fix the name/URL`, secrets));
        }
      }
    }
    return checks;
  } catch (error) {
    return [failure(name, error, `check that SQS at ${where} is reachable and credentials are set`, secrets)];
  } finally {
    client.destroy();
  }
}

/** Probes every configured service in parallel; `limits` receives what the brokers report. */
export async function probeServices(
  settings: ConnectionSettings,
  services: CliServices,
  options: ProbeOptions,
  limits: ProbedLimits,
): Promise<DoctorCheck[]> {
  const ms = options.timeoutMs ?? 10_000;
  const secrets = secretScrubber([], options.env)
    .addConnectionString(settings.databaseUrl)
    .addConnectionString(settings.amqpUrl)
    .addConnectionString(settings.sqsEndpoint);
  const results = await Promise.all([
    probePostgres(settings, services, ms, secrets),
    probeKafka(settings, options, ms, secrets),
    probeRabbitmq(settings, options, ms, secrets),
    probeSqs(settings, options, ms, limits, secrets),
  ]);
  return results.flat();
}
