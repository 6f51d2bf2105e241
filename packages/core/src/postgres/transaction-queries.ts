// Which SQL runs in an open seam transaction, by its transaction object: lets code that is handed only the
// handler's `context.tx` (the outbox's `enqueue`, `transactionalOutbox()`) write into that very transaction
// whatever the data layer (a pg PoolClient, a Knex transaction, Prisma's transaction client …). A seam registers
// each transaction while it is open; the map lives on a `Symbol.for` key, so duplicate installs share it.

import type { SqlRow, SqlStatement } from './sql-seam.js';

/** Runs one statement in an open transaction. */
export type TransactionQuery = (statement: SqlStatement) => Promise<SqlRow[]>;

const KEY = Symbol.for('inboxkit.transactionQueries');
const registry = ((globalThis as { [KEY]?: WeakMap<object, TransactionQuery> })[KEY] ??= new WeakMap<object, TransactionQuery>());

/**
 * Registers `query` as the way to run SQL in `tx` until the returned function is called (when the
 * transaction ends). For authors of a `SqlSeam`; `tx` must be an object.
 *
 * @example
 * const close = registerTransactionQuery(client, (s) => client.query(s.sql, [...s.parameters]).then((r) => r.rows));
 * try { await work(); } finally { close(); }
 */
export function registerTransactionQuery(tx: unknown, query: TransactionQuery): () => void {
  if ((typeof tx !== 'object' && typeof tx !== 'function') || tx === null) return () => {};
  registry.set(tx, query);
  return () => {
    if (registry.get(tx) === query) registry.delete(tx);
  };
}

/**
 * How to run SQL in `tx`, an open seam transaction's object (a handler's `context.tx`); `undefined` when `tx` is
 * not one (a Kysely transaction is not registered: it runs SQL itself).
 *
 * @example
 * const query = transactionQuery(context.tx);
 * if (query) await query({ sql: 'INSERT INTO audit (id) VALUES ($1::text)', parameters: [id] });
 */
export function transactionQuery(tx: unknown): TransactionQuery | undefined {
  return (typeof tx === 'object' || typeof tx === 'function') && tx !== null ? registry.get(tx) : undefined;
}
