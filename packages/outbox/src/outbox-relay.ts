// The relay: delivers committed outbox rows through core's Publisher port, at least once, with the id fixed at
// enqueue. Claim, publish and mark-dispatched run in one transaction holding the rows' locks, so a relay that
// dies anywhere before its commit leaves the rows to be published again (same id), never lost.

import {
  ConfigurationError,
  DEFAULT_BACKOFF,
  backoffDelayMs,
  errorChain,
  isInboxkitError,
  inboxkitTracer,
  silentLogger,
  withSendSpans,
  type BackoffPolicy,
  type Logger,
  type OutgoingMessage,
  type Publisher,
} from '@inboxkit/core';
import { metrics, type MeterProvider, type TracerProvider } from '@opentelemetry/api';
import { sql, type Kysely } from 'kysely';
import { guardedTransaction } from '@inboxkit/core/postgres';
import { resolveOutboxTableNames, type OutboxTableOptions } from './outbox-table-names.js';

/** The slice of a `pg` pool client the relay LISTENs on. */
export interface ListenClient {
  query(text: string): Promise<unknown>;
  on(event: 'notification', listener: (message: unknown) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  release(destroy?: boolean): void;
}

/** Where the relay gets its dedicated LISTEN connection: a `pg.Pool` fits. */
export interface ListenSource {
  connect(): Promise<ListenClient>;
}

/** Configuration of `startOutboxRelay`. Validated once, then frozen. */
export interface OutboxRelayOptions<DB> extends OutboxTableOptions {
  /** The application's Kysely instance (the relay never destroys it). */
  readonly db: Kysely<DB>;
  /** Publishers by the name rows carry in `publisher` (`default` when enqueued without one). The relay never closes them. */
  readonly publishers: Readonly<Record<string, Publisher>>;
  /** Rows claimed per transaction (one per partition key). Default is 100. */
  readonly batchSize?: number;
  /**
   * Rows of one partition key taken per claim: the key's oldest undispatched row plus up to `rowsPerKey - 1`
   * following ones, published in order in one `publish` call. Above 1 this relies on the publisher keeping the
   * order of one call's messages per key (Kafka with an idempotent producer, a RabbitMQ confirm channel); keep 1
   * for a publisher that retries entries of a batch separately (SQS FIFO). Default is 1.
   */
  readonly rowsPerKey?: number;
  /**
   * Claim–publish–mark transactions one relay runs at once, each on its own connection: while one waits for the
   * broker or its commit, another claims. They share nothing but the table, exactly like that many relays
   * (`SKIP LOCKED`, only a key's oldest row eligible), so order per key holds. Default is 1.
   */
  readonly concurrency?: number;
  /** Polling interval when no notification arrives. Default is 1,000 ms. */
  readonly pollIntervalMs?: number;
  /** A pool to LISTEN on for immediate wake-ups; without it the relay only polls. Default is none. */
  readonly listen?: ListenSource;
  /** Backoff between failed publishes of a row. Default is core's DEFAULT_BACKOFF (1 s, ×2, ≤ 5 min, full jitter). */
  readonly backoff?: BackoffPolicy;
  /** A row still failing this long after its enqueue is parked (kept, with its error, never dropped). Default is 86,400,000 ms (24 h). */
  readonly parkAfterMs?: number;
  /** Dispatched rows are deleted after this long. Default is 604,800,000 ms (7 days). */
  readonly retentionMs?: number;
  /** How often the relay prunes. Default is 60,000 ms. */
  readonly pruneIntervalMs?: number;
  /** Default is the global OpenTelemetry meter provider. */
  readonly meterProvider?: MeterProvider;
  /**
   * Where the relay's PRODUCER spans go: one per row sent, a child of the span the row was enqueued in (its
   * stored `traceparent`). Default is the global OpenTelemetry tracer provider (no-op until an SDK registers).
   */
  readonly tracerProvider?: TracerProvider;
  /** Default is a silent logger. */
  readonly logger?: Logger;
}

/** A running relay. */
export interface OutboxRelay {
  /** Stops after the current batch (its transaction commits or rolls back), and releases the LISTEN connection. Safe to call twice. */
  stop(): Promise<void>;
}

/** The relay's metric names (attribute `table`). */
export const OUTBOX_METRIC_NAMES = Object.freeze({
  backlog: 'inboxkit.outbox.backlog',
  oldestAge: 'inboxkit.outbox.oldest_undispatched_age',
  parked: 'inboxkit.outbox.parked',
  published: 'inboxkit.outbox.published',
  publishFailures: 'inboxkit.outbox.publish_failures',
});

/**
 * The id of the message a publish error says can never be published (an inboxkit error, anywhere in its cause
 * chain, that is not retriable and names its message: `MessageTooLargeError`), else `undefined`: the failure
 * may pass (broker down, unknown publisher) and the rows are retried.
 */
function unpublishableMessageId(error: unknown): string | undefined {
  for (const e of errorChain(error)) {
    if (!isInboxkitError(e) || e.retriable) continue;
    const id = (e as { messageId?: unknown }).messageId;
    if (typeof id === 'string') return id;
  }
  return undefined;
}

interface Row {
  seq: string;
  id: string;
  publisher: string;
  destination: string;
  routing_key: string | null;
  partition_key: string | null;
  headers: Record<string, string>;
  payload: Buffer;
  payload_text: boolean;
  delay_ms: number | null;
  created_at: Date;
  attempts: number;
}

function positive(value: number | undefined, fallback: number, option: string): number {
  const v = value ?? fallback;
  if (!Number.isFinite(v) || v <= 0) throw new ConfigurationError(`startOutboxRelay: \`${option}\` must be a positive number, got ${v}`);
  return v;
}

function toOutgoing(row: Row): OutgoingMessage {
  return {
    destination: row.destination,
    id: row.id,
    body: row.payload_text ? row.payload.toString('utf8') : new Uint8Array(row.payload),
    headers: row.headers,
    ...(row.partition_key === null ? {} : { key: row.partition_key }),
    ...(row.routing_key === null ? {} : { routingKey: row.routing_key }),
    ...(row.delay_ms === null ? {} : { delayMs: row.delay_ms }),
    // Fixed once per row (its enqueue time), so a resend after a crash between send and mark-dispatched carries
    // the same timestamp as the first send: a broker-stamped time would differ, and the partitioned inbox
    // (keyed by the UTC day of the timestamp) would run a resend across midnight again.
    timestamp: row.created_at,
  };
}

/**
 * Starts a relay. Several relays (processes) may run on one table: each claims with `FOR UPDATE SKIP LOCKED`.
 * Per (publisher, destination, partition key) only the oldest undispatched row is eligible, so a key's
 * messages are published in enqueue order, one at a time. A row is marked dispatched only after its publisher
 * resolved (the broker confirmed); a failure reschedules it with backoff, and past `parkAfterMs` parks it. A row
 * the publisher says can never be published (a non-retriable `MessageTooLargeError` naming its id: too large for
 * the broker) is parked at once, with that error as its reason, so its key's later rows go out.
 * Every send of a row carries the row's enqueue time (`created_at`) as `OutgoingMessage.timestamp`, so a row
 * sent again after a crash reaches the consumer with the same timestamp (and the same id) as the first time.
 *
 * @example
 * const relay = startOutboxRelay({ db, publishers: { default: kafkaPublisher({ producer }) }, listen: pool });
 * // on shutdown
 * await relay.stop();
 */
export function startOutboxRelay<DB>(options: OutboxRelayOptions<DB>): OutboxRelay {
  const names = resolveOutboxTableNames(options);
  if (typeof options.db?.transaction !== 'function') throw new ConfigurationError('startOutboxRelay: `db` must be a Kysely instance');
  const publishers = options.publishers;
  if (typeof publishers !== 'object' || publishers === null || Object.keys(publishers).length === 0) {
    throw new ConfigurationError('startOutboxRelay: `publishers` must name at least one Publisher');
  }
  for (const [name, publisher] of Object.entries(publishers)) {
    if (typeof publisher?.publish !== 'function') throw new ConfigurationError(`startOutboxRelay: publisher \`${name}\` has no publish()`);
  }
  const batchSize = positive(options.batchSize, 100, 'batchSize');
  const rowsPerKey = positive(options.rowsPerKey, 1, 'rowsPerKey');
  if (!Number.isInteger(rowsPerKey)) throw new ConfigurationError(`startOutboxRelay: \`rowsPerKey\` must be an integer, got ${rowsPerKey}`);
  const concurrency = positive(options.concurrency, 1, 'concurrency');
  if (!Number.isInteger(concurrency)) throw new ConfigurationError(`startOutboxRelay: \`concurrency\` must be an integer, got ${concurrency}`);
  const pollIntervalMs = positive(options.pollIntervalMs, 1_000, 'pollIntervalMs');
  const parkAfterMs = positive(options.parkAfterMs, 86_400_000, 'parkAfterMs');
  const retentionMs = positive(options.retentionMs, 604_800_000, 'retentionMs');
  const pruneIntervalMs = positive(options.pruneIntervalMs, 60_000, 'pruneIntervalMs');
  const backoff = Object.freeze({ ...DEFAULT_BACKOFF, ...options.backoff });
  const logger = options.logger ?? silentLogger;
  const db = options.db as unknown as Kysely<unknown>;
  const table = sql.raw(names.qualifiedTable);

  const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter('@inboxkit/outbox');
  const tracer = inboxkitTracer(options.tracerProvider);
  const attributes = { table: `${names.schema}.${names.table}` };
  const published = meter.createCounter(OUTBOX_METRIC_NAMES.published, { description: 'Rows published and marked dispatched' });
  const failures = meter.createCounter(OUTBOX_METRIC_NAMES.publishFailures, { description: 'Rows whose publish failed' });
  const parked = meter.createCounter(OUTBOX_METRIC_NAMES.parked, { description: 'Rows parked after failing past the horizon' });
  const backlog = meter.createObservableGauge(OUTBOX_METRIC_NAMES.backlog, { description: 'Undispatched, unparked rows' });
  const oldestAge = meter.createObservableGauge(OUTBOX_METRIC_NAMES.oldestAge, { description: 'Age of the oldest undispatched row', unit: 's' });
  const observe = async (result: { observe(value: number, attrs: typeof attributes): void }, which: 'count' | 'age') => {
    const { rows } = await sql<{ count: string; age: number | null }>`SELECT count(*) AS count,
        extract(epoch FROM clock_timestamp() - min(created_at))::float8 AS age
      FROM ${table} WHERE dispatched_at IS NULL AND parked_at IS NULL`.execute(db);
    const row = rows[0];
    result.observe(which === 'count' ? Number(row?.count ?? 0) : (row?.age ?? 0), attributes);
  };
  const observeBacklog = (result: Parameters<typeof observe>[0]) => observe(result, 'count').catch(() => {});
  const observeAge = (result: Parameters<typeof observe>[0]) => observe(result, 'age').catch(() => {});
  backlog.addCallback(observeBacklog);
  oldestAge.addCallback(observeAge);

  let stopped = false;
  /** The wake-ups of the loops sleeping now. */
  const sleepers = new Set<() => void>();
  /** Notifications received so far: one that arrived since a loop's claim began makes it claim again instead of sleeping. */
  let notifications = 0;
  let lastPrune = 0;
  let listenClient: ListenClient | undefined;

  /** One claim–publish–mark transaction; resolves once it committed, with the rows it dispatched and parked. */
  async function publishBatch(): Promise<number> {
    // Guarded: the transaction stays open while the broker confirms, and a Postgres restart meanwhile must
    // reject this batch (the rows stay undispatched), not crash the process (guardedTransaction).
    const counts = await guardedTransaction(db, async (trx) => {
      let parkedRows = 0;
      const { rows } = await sql<Row>`SELECT seq, id, publisher, destination, routing_key, partition_key, headers,
          payload, payload_text, delay_ms, created_at, attempts
        FROM ${table} o
        WHERE dispatched_at IS NULL AND parked_at IS NULL AND available_at <= clock_timestamp()
          AND (o.partition_key IS NULL OR NOT EXISTS (SELECT 1 FROM ${table} p
            WHERE p.publisher = o.publisher AND p.destination = o.destination AND p.partition_key = o.partition_key
              AND p.dispatched_at IS NULL AND p.parked_at IS NULL AND p.seq < o.seq))
        ORDER BY seq LIMIT ${batchSize}
        FOR UPDATE SKIP LOCKED`.execute(trx);
      const heads = rows.filter((row) => row.partition_key !== null).map((row) => row.seq);
      if (rowsPerKey > 1 && heads.length > 0) {
        // Holding a key's head row makes its followers ours: no other relay finds them eligible until the head
        // is dispatched. They are locked all the same.
        const { rows: followers } = await sql<Row>`SELECT f.* FROM ${table} h
          CROSS JOIN LATERAL (SELECT seq, id, publisher, destination, routing_key, partition_key, headers,
              payload, payload_text, delay_ms, created_at, attempts
            FROM ${table} x
            WHERE x.publisher = h.publisher AND x.destination = h.destination AND x.partition_key = h.partition_key
              AND x.dispatched_at IS NULL AND x.parked_at IS NULL AND x.seq > h.seq
            ORDER BY x.seq LIMIT ${rowsPerKey - 1}
            FOR UPDATE) f
          WHERE h.seq = ANY(${heads}::bigint[])`.execute(trx);
        rows.push(...followers);
        rows.sort((a, b) => (BigInt(a.seq) < BigInt(b.seq) ? -1 : 1));
      }
      const groups = new Map<string, Row[]>();
      for (const row of rows) groups.set(row.publisher, [...(groups.get(row.publisher) ?? []), row]);
      let done = 0;
      for (const [name, group] of groups) {
        const seqs = group.map((row) => row.seq);
        try {
          const publisher = publishers[name];
          if (publisher === undefined) throw new ConfigurationError(`no publisher named ${JSON.stringify(name)} in startOutboxRelay's publishers`);
          await withSendSpans(tracer, group.map(toOutgoing), (messages) => publisher.publish(messages));
        } catch (error) {
          failures.add(group.length, attributes);
          const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
          logger.warn({ err: error, publisher: name, rows: group.length }, 'outbox publish failed; rows rescheduled');
          // A row whose message the broker can never take is parked now, with its reason: retrying it would
          // hold its key's later rows until the horizon.
          const unpublishable = unpublishableMessageId(error);
          for (const row of group) {
            const park = row.id === unpublishable || Date.now() - row.created_at.getTime() >= parkAfterMs;
            if (park) parkedRows++;
            const delay = backoffDelayMs(backoff, row.attempts + 1);
            await sql`UPDATE ${table} SET attempts = attempts + 1, last_error = ${message},
                available_at = clock_timestamp() + make_interval(secs => ${delay / 1000}),
                parked_at = CASE WHEN ${park} THEN clock_timestamp() END
              WHERE seq = ${row.seq}`.execute(trx);
          }
          continue;
        }
        await sql`UPDATE ${table} SET dispatched_at = clock_timestamp(), attempts = attempts + 1
          WHERE seq = ANY(${seqs}::bigint[])`.execute(trx);
        done += group.length;
      }
      return { done, parkedRows };
    });
    // Counted after the commit: a rolled-back batch published nothing durable for the outbox.
    if (counts.done > 0) published.add(counts.done, attributes);
    if (counts.parkedRows > 0) parked.add(counts.parkedRows, attributes);
    return counts.done;
  }

  async function prune(): Promise<void> {
    if (Date.now() - lastPrune < pruneIntervalMs) return;
    lastPrune = Date.now();
    await sql`DELETE FROM ${table} WHERE seq IN (SELECT seq FROM ${table}
        WHERE dispatched_at < clock_timestamp() - make_interval(secs => ${retentionMs / 1000}) LIMIT 10000)`.execute(db);
  }

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        sleepers.delete(done);
        resolve();
      }
      sleepers.add(done);
    });
  }

  function wakeAll(): void {
    for (const done of [...sleepers]) done();
  }

  /** (Re)opens the LISTEN connection when there is none; a lost one is replaced on a later cycle. */
  /** The LISTEN connection being opened, so that concurrent loops open one. */
  let opening: Promise<void> | undefined;
  function listen(): Promise<void> {
    if (options.listen === undefined || listenClient !== undefined || stopped) return Promise.resolve();
    opening ??= openListen().finally(() => (opening = undefined));
    return opening;
  }

  async function openListen(): Promise<void> {
    if (options.listen === undefined) return;
    let client: ListenClient | undefined;
    try {
      client = await options.listen.connect();
      const own = client;
      listenClient = own;
      // Without an error listener a dropped connection would crash the process; polling covers the gap.
      own.on('error', (error: Error) => {
        logger.warn({ err: error }, 'outbox relay lost its LISTEN connection; polling until it reconnects');
        if (listenClient === own) listenClient = undefined;
        own.release(true);
      });
      own.on('notification', () => {
        notifications += 1;
        wakeAll();
      });
      await own.query(`LISTEN "${names.channel}"`);
    } catch (error) {
      logger.warn({ err: error }, 'outbox relay could not LISTEN; polling only');
      if (client !== undefined && listenClient === client) {
        listenClient = undefined;
        client.release(true);
      }
    }
  }

  async function run(): Promise<void> {
    while (!stopped) {
      await listen();
      let count = 0;
      const seen = notifications;
      try {
        count = await publishBatch();
        await prune();
      } catch (error) {
        logger.error({ err: error }, 'outbox relay cycle failed; retrying after the poll interval');
      }
      if (!stopped && count === 0 && notifications === seen) await sleep(pollIntervalMs);
    }
  }

  const running = Promise.all(Array.from({ length: concurrency }, () => run()));
  let stopping: Promise<void> | undefined;
  return Object.freeze({
    stop(): Promise<void> {
      stopping ??= (async () => {
        stopped = true;
        wakeAll();
        await running;
        backlog.removeCallback(observeBacklog);
        oldestAge.removeCallback(observeAge);
        if (listenClient !== undefined) {
          await listenClient.query(`UNLISTEN "${names.channel}"`).catch(() => {});
          listenClient.release();
        }
      })();
      return stopping;
    },
  });
}
