// The pipeline torture's relay process: startOutboxRelay over the run's outbox table, publishing to Kafka
// (acks all, idempotent producer), waking on LISTEN/NOTIFY. Several run at once; the harness SIGKILLs them
// between claim, publish and mark-dispatched, so rows are published again with the same id and the sink's
// inbox must absorb the copies. Prints `ready` once started; SIGTERM stops it after its current batch.
//
//   node --conditions=@inboxkit/source --import tsx test/torture/pipeline-relay-process.ts '<json settings>'

import type { Logger } from '@inboxkit/core';
import { kafkaPublisher } from '@inboxkit/kafka';
import { startOutboxRelay } from '@inboxkit/outbox';
import { Kafka, logLevel } from 'kafkajs';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

import type { PipelineRelaySettings } from './pipeline-settings.js';

const settings = JSON.parse(process.argv[2] ?? '{}') as PipelineRelaySettings;

const logger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: (obj, msg) => process.stderr.write(`warn ${msg ?? ''} ${brief(obj)}\n`),
  error: (obj, msg) => process.stderr.write(`error ${msg ?? ''} ${brief(obj)}\n`),
};

function brief(obj: object): string {
  const err = (obj as { err?: unknown }).err;
  return err instanceof Error ? `${err.name}: ${err.message}` : '';
}

const pool = new pg.Pool({ connectionString: settings.databaseUrl, max: settings.poolSize });
pool.on('error', (error) => process.stderr.write(`pool error ${error.message}\n`));
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
const kafka = new Kafka({
  clientId: `pipeline-relay-${settings.index}`,
  brokers: [...settings.kafkaBrokers],
  logLevel: logLevel.NOTHING,
  retry: { initialRetryTime: 200, retries: 5, maxRetryTime: 2_000 },
});
const publisher = kafkaPublisher({ kafka, timeoutMs: 15_000 });

const relay = startOutboxRelay({
  db,
  schema: settings.schema,
  publishers: { default: publisher },
  listen: pool,
  batchSize: settings.batchSize,
  rowsPerKey: settings.rowsPerKey,
  concurrency: settings.concurrency,
  pollIntervalMs: 250,
  backoff: { initialDelayMs: 200, multiplier: 2, maxDelayMs: 2_000 },
  logger,
});
process.stdout.write('ready\n');

process.once('SIGTERM', () => {
  void (async () => {
    await relay.stop();
    await publisher.close().catch(() => undefined);
    await db.destroy();
    process.exit(0);
  })();
});
