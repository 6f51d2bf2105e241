// enqueue(tx, message): writes an outgoing message into the outbox inside the caller's transaction, so it
// commits (and is later published) exactly when the transaction's effect does. outbox(tx) binds it once. The
// transaction is a Kysely one, or the `context.tx` of any data layer's inbox transaction (@inboxkit/data: a pg
// PoolClient, a Knex or Drizzle transaction, postgres.js, TypeORM's EntityManager, Prisma's transaction client),
// which the seam registered for the time it is open.

import { ConfigurationError, injectTraceHeaders } from '@inboxkit/core';
import { transactionQuery, type SqlStatement } from '@inboxkit/core/postgres';
import { CompiledQuery, type Kysely } from 'kysely';
import type { OutboxMessage } from './outbox-message.js';
import {
  resolveOutboxTableNames,
  type OutboxTableNames,
  type OutboxTableOptions,
} from './outbox-table-names.js';
import { uuidv7 } from './uuid-v7.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Where `enqueue` writes, and whether it wakes the relays. */
export interface EnqueueOptions extends OutboxTableOptions {
  /**
   * Send `pg_notify` with the row, so relays LISTENing wake at once when the transaction commits. Default is
   * true. Postgres serialises the commits of all notifying transactions (a database-wide lock held through the
   * commit's WAL flush), which caps a busy producer's commit rate; with `false`, relays find the rows by polling
   * (give them a short `pollIntervalMs`, e.g. 50 ms). Correctness does not depend on it either way.
   */
  readonly notify?: boolean;
}

/** An outbox bound to one transaction. */
export interface BoundOutbox {
  /** Enqueues a message in the bound transaction; resolves with its id. */
  enqueue(message: OutboxMessage): Promise<string>;
}

function validate(message: OutboxMessage): void {
  if (typeof message.destination !== 'string' || message.destination === '') {
    throw new ConfigurationError('enqueue: `destination` must be a non-empty string');
  }
  if (typeof message.body !== 'string' && !(message.body instanceof Uint8Array)) {
    throw new ConfigurationError('enqueue: `body` must be a string or a Uint8Array');
  }
  if (message.id !== undefined && !UUID.test(message.id)) {
    throw new ConfigurationError(
      `enqueue: \`id\` must be a UUID (uuidv7() or deterministicMessageId()), got ${JSON.stringify(message.id)}`,
    );
  }
  if (message.delayMs !== undefined && (!Number.isInteger(message.delayMs) || message.delayMs < 0)) {
    throw new ConfigurationError(
      `enqueue: \`delayMs\` must be a non-negative integer, got ${message.delayMs}`,
    );
  }
}

/**
 * A transaction `enqueue` can write in: a Kysely transaction (or instance), or the `context.tx` a data-layer
 * seam hands a handler while its transaction is open (see `@inboxkit/data`).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any Kysely, whatever its DB type
export type OutboxTransaction = Kysely<any> | object;

/** How to run the INSERT in `tx`, or a `ConfigurationError` saying what `tx` must be. */
function runnerOf(tx: unknown, caller: string): (statement: SqlStatement) => Promise<unknown> {
  if (typeof (tx as Partial<Kysely<unknown>> | null)?.executeQuery === 'function') {
    const db = tx as Kysely<unknown>;
    return (statement) => db.executeQuery(CompiledQuery.raw(statement.sql, [...statement.parameters]));
  }
  const query = transactionQuery(tx);
  if (query !== undefined) return query;
  throw new ConfigurationError(
    `${caller}: the transaction is neither a Kysely transaction nor the context.tx of an open inbox transaction (a data-layer seam from @inboxkit/data); pass the handler's context.tx while the handler runs`,
  );
}

async function insert(
  run: (statement: SqlStatement) => Promise<unknown>,
  names: OutboxTableNames,
  message: OutboxMessage,
  notify: boolean,
): Promise<string> {
  validate(message);
  const id = message.id ?? uuidv7();
  const text = typeof message.body === 'string';
  const payload = text ? Buffer.from(message.body, 'utf8') : Buffer.from(message.body);
  // The headers keep the active trace context (the handler's span): the relay's send continues that trace.
  // ON CONFLICT: a deterministic id enqueued again (a replayed handler) keeps the first row; downstream
  // inboxes deduplicate by id anyway. The NOTIFY rides in the same statement (one round trip per enqueue); it is
  // delivered at commit only, and dropped on rollback, so relays LISTENing wake for committed rows without polling.
  const row = `INSERT INTO ${names.qualifiedTable}
      (id, publisher, destination, routing_key, partition_key, headers, payload, payload_text, delay_ms)
    VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::text, $6::jsonb, $7::bytea, $8::boolean, $9::int)
    ON CONFLICT (id) DO NOTHING`;
  const parameters = [
    id,
    message.publisher ?? 'default',
    message.destination,
    message.routingKey ?? null,
    message.key ?? null,
    JSON.stringify(injectTraceHeaders(message.headers)),
    payload,
    text,
    message.delayMs ?? null,
  ];
  if (!notify) await run({ sql: row, parameters });
  else
    await run({
      sql: `WITH inserted AS (${row}) SELECT 1 AS notified FROM pg_notify($10::text, '')`,
      parameters: [...parameters, names.channel],
    });
  return id;
}

/** Validates `notify` (a `ConfigurationError` otherwise); default true. */
export function notifyOption(options: EnqueueOptions): boolean {
  if (options.notify !== undefined && typeof options.notify !== 'boolean') {
    throw new ConfigurationError(
      `enqueue: \`notify\` must be a boolean, got ${JSON.stringify(options.notify)}`,
    );
  }
  return options.notify ?? true;
}

/**
 * Enqueues `message` in `tx`, the caller's Kysely transaction, or inside `idempotentConsumer()` the handler's
 * `context.tx` whatever its data layer (a `ConfigurationError` otherwise): the row commits or rolls back with it. Resolves with the message id (a new UUIDv7 unless the
 * message carries one), which every re-publish keeps. Table options default to `inboxkit.outbox`; `notify`
 * (default true) wakes LISTENing relays at commit.
 *
 * @example
 * handler: async (message, context) => {
 *   await context.tx.insertInto('orders').values(order).execute();
 *   await enqueue(context.tx, { publisher: 'kafka', destination: 'orders.created', key: order.id, body: JSON.stringify(order) });
 * }
 */
export async function enqueue(
  tx: OutboxTransaction,
  message: OutboxMessage,
  options: EnqueueOptions = {},
): Promise<string> {
  return insert(runnerOf(tx, 'enqueue'), resolveOutboxTableNames(options), message, notifyOption(options));
}

/**
 * Binds the outbox to a transaction once (names validated once). Same contract as `enqueue`.
 *
 * @example
 * const out = outbox(context.tx);
 * await out.enqueue({ destination: 'ledger', body });
 */
export function outbox(tx: OutboxTransaction, options: EnqueueOptions = {}): BoundOutbox {
  const names = resolveOutboxTableNames(options);
  const notify = notifyOption(options);
  const run = runnerOf(tx, 'outbox');
  return Object.freeze({ enqueue: (message: OutboxMessage) => insert(run, names, message, notify) });
}
