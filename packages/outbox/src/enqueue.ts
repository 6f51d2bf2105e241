// enqueue(tx, message): writes an outgoing message into the outbox inside the caller's transaction, so it
// commits (and is later published) exactly when the transaction's effect does. outbox(tx) binds it once.

import { ConfigurationError, injectTraceHeaders } from '@inboxkit/core';
import { sql, type Kysely } from 'kysely';
import type { OutboxMessage } from './outbox-message.js';
import { resolveOutboxTableNames, type OutboxTableNames, type OutboxTableOptions } from './outbox-table-names.js';
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
    throw new ConfigurationError(`enqueue: \`id\` must be a UUID (uuidv7() or deterministicMessageId()), got ${JSON.stringify(message.id)}`);
  }
  if (message.delayMs !== undefined && (!Number.isInteger(message.delayMs) || message.delayMs < 0)) {
    throw new ConfigurationError(`enqueue: \`delayMs\` must be a non-negative integer, got ${message.delayMs}`);
  }
}

async function insert(db: Kysely<unknown>, names: OutboxTableNames, message: OutboxMessage, notify: boolean): Promise<string> {
  validate(message);
  const id = message.id ?? uuidv7();
  const text = typeof message.body === 'string';
  const payload = text ? Buffer.from(message.body, 'utf8') : Buffer.from(message.body);
  // The headers keep the active trace context (the handler's span): the relay's send continues that trace.
  // ON CONFLICT: a deterministic id enqueued again (a replayed handler) keeps the first row; downstream
  // inboxes deduplicate by id anyway. The NOTIFY rides in the same statement (one round trip per enqueue); it is
  // delivered at commit only, and dropped on rollback, so relays LISTENing wake for committed rows without polling.
  const row = sql`INSERT INTO ${sql.raw(names.qualifiedTable)}
      (id, publisher, destination, routing_key, partition_key, headers, payload, payload_text, delay_ms)
    VALUES (${id}, ${message.publisher ?? 'default'}, ${message.destination}, ${message.routingKey ?? null},
      ${message.key ?? null}, ${JSON.stringify(injectTraceHeaders(message.headers))}::jsonb, ${payload}, ${text}, ${message.delayMs ?? null})
    ON CONFLICT (id) DO NOTHING`;
  await (notify ? sql`WITH inserted AS (${row}) SELECT pg_notify(${names.channel}, '')` : row).execute(db);
  return id;
}

/** Validates `notify` (a `ConfigurationError` otherwise); default true. */
export function notifyOption(options: EnqueueOptions): boolean {
  if (options.notify !== undefined && typeof options.notify !== 'boolean') {
    throw new ConfigurationError(`enqueue: \`notify\` must be a boolean, got ${JSON.stringify(options.notify)}`);
  }
  return options.notify ?? true;
}

/**
 * Enqueues `message` in `tx`, the caller's Kysely transaction (inside `idempotentConsumer()`, the handler's
 * `context.tx`): the row commits or rolls back with it. Resolves with the message id (a new UUIDv7 unless the
 * message carries one), which every re-publish keeps. Table options default to `inboxkit.outbox`; `notify`
 * (default true) wakes LISTENing relays at commit.
 *
 * @example
 * handler: async (message, context) => {
 *   await context.tx.insertInto('orders').values(order).execute();
 *   await enqueue(context.tx, { publisher: 'kafka', destination: 'orders.created', key: order.id, body: JSON.stringify(order) });
 * }
 */
export async function enqueue<DB>(tx: Kysely<DB>, message: OutboxMessage, options: EnqueueOptions = {}): Promise<string> {
  return insert(tx as unknown as Kysely<unknown>, resolveOutboxTableNames(options), message, notifyOption(options));
}

/**
 * Binds the outbox to a transaction once (names validated once). Same contract as `enqueue`.
 *
 * @example
 * const out = outbox(context.tx);
 * await out.enqueue({ destination: 'ledger', body });
 */
export function outbox<DB>(tx: Kysely<DB>, options: EnqueueOptions = {}): BoundOutbox {
  const names = resolveOutboxTableNames(options);
  const notify = notifyOption(options);
  const db = tx as unknown as Kysely<unknown>;
  return Object.freeze({ enqueue: (message: OutboxMessage) => insert(db, names, message, notify) });
}
