// postgres.js: the handler's `context.tx` is the `TransactionSql` of `sql.begin()`. postgres.js fails a
// transaction in which any statement failed, even one the handler caught (it rolls back and rejects with that
// error), so no aborted transaction can pass for committed.

import { ConfigurationError } from '@inboxkit/core';
import {
  PostgresInboxStore,
  type InboxStoreOptions,
  type SqlRow,
  type SqlSeam,
  type SqlStatement,
} from '@inboxkit/core/postgres';
import type { Sql, TransactionSql } from 'postgres';
import { librarySeam } from '../library-seam.js';
import { refusingSql } from '../refuse-control.js';

/** The slice of a postgres.js `sql` the seam uses. */
type Unsafe = Pick<Sql, 'unsafe'>;

/**
 * Runs `statement` through postgres.js (`$n` placeholders are its own), prepared unless the `sql` was made with
 * `prepare: false`. postgres.js serializes a parameter by
 * the type Postgres infers for it, and a JSON parameter with `JSON.stringify` — a second time, for the store's
 * JSON text — so `$n::json(b)` is sent as text and cast by Postgres; dates go as ISO text (see `isoDates`).
 */
export async function unsafeQuery(sql: Unsafe, statement: SqlStatement): Promise<SqlRow[]> {
  let text = texts.get(statement.sql);
  if (text === undefined) {
    text = statement.sql
      .replace(/(\$\d+)::(jsonb?)\b/g, '$1::text::$2')
      .replace(/(\$\d+)::(timestamptz|timestamp|date)(\[\])?/g, '$1::text$3::$2$3');
    if (texts.size >= 200) texts.clear();
    texts.set(statement.sql, text);
  }
  // Prepared per connection, as postgres.js' tagged templates are (`prepare: false` on the `sql` still wins):
  // unprepared, postgres.js sends a statement with parameters in two round trips (Parse + Describe first, for
  // the parameters' types); prepared, in one from its second use on a connection. The store's texts are few
  // and fixed (the claim's is built once per store).
  return [...(await sql.unsafe(text, statement.parameters.map(isoDates) as never[], { prepare: true }))] as SqlRow[];
}

const texts = new Map<string, string>();

/**
 * Dates as ISO text, sent as text and cast by Postgres (`unsafeQuery` rewrites `$n::timestamptz` so): Drizzle
 * replaces postgres.js' date serializers of the `sql` it is given with ones that pass values through untouched.
 */
function isoDates(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  return Array.isArray(value) ? value.map(isoDates) : value;
}

/**
 * The seam over a postgres.js `sql` (its pool): each transaction is `sql.begin()`, and handlers get its
 * `TransactionSql` as `context.tx`. Throws a `ConfigurationError` for a transaction's or a reserved
 * connection's `sql`, which would run every delivery on one connection.
 *
 * @example
 * const sql = postgres(process.env.DATABASE_URL);
 * const store = new PostgresInboxStore({ seam: postgresJsSeam(sql) });
 * idempotentConsumer({ name: 'orders', store, handler: async (m, { tx }) => { await tx`INSERT INTO orders (id) VALUES (${m.id})`; } });
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- postgres.js' own default type map
export function postgresJsSeam<TTypes extends Record<string, unknown> = {}>(
  sql: Sql<TTypes>,
): SqlSeam<TransactionSql<TTypes>> {
  checkSql(sql, 'postgresJsSeam');
  return librarySeam<TransactionSql<TTypes>>({
    query: (statement) => unsafeQuery(sql, statement),
    transaction: (fn, _first, watch) =>
      sql.begin((tx) =>
        fn({
          tx: refusingSql(tx, watch),
          query: (statement) => unsafeQuery(tx, statement),
          aborted: () => Promise.resolve(false),
        }),
      ) as Promise<never>,
  });
}

/** Options of `postgresJsInboxStore`. */
export interface PostgresJsInboxStoreOptions<
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- postgres.js' own default type map
  TTypes extends Record<string, unknown> = {},
> extends InboxStoreOptions {
  /** The application's postgres.js `sql`. Never ended here. */
  readonly sql: Sql<TTypes>;
}

/**
 * The Postgres inbox over postgres.js: `new PostgresInboxStore({ seam: postgresJsSeam(sql) })` with the table
 * options.
 *
 * @example
 * const store = postgresJsInboxStore({ sql, schema: 'inboxkit' });
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- postgres.js' own default type map
export function postgresJsInboxStore<TTypes extends Record<string, unknown> = {}>(
  options: PostgresJsInboxStoreOptions<TTypes>,
): PostgresInboxStore<unknown, TransactionSql<TTypes>> {
  return new PostgresInboxStore<unknown, TransactionSql<TTypes>>({
    ...options,
    seam: postgresJsSeam(options.sql),
  });
}

/** Refuses what is not postgres.js' root `sql`: a transaction's or a reserved connection's would be shared. */
export function checkSql(sql: unknown, caller: string): void {
  const candidate = sql as
    | (((...args: unknown[]) => unknown) & {
        unsafe?: unknown;
        savepoint?: unknown;
        release?: unknown;
        begin?: unknown;
      })
    | undefined;
  if (typeof candidate !== 'function' || typeof candidate.unsafe !== 'function') {
    throw new ConfigurationError(`${caller} needs postgres.js' sql: postgres(connectionString)`);
  }
  if (
    typeof candidate.savepoint === 'function' ||
    typeof candidate.release === 'function' ||
    typeof candidate.begin !== 'function'
  ) {
    throw new ConfigurationError(
      `${caller} was given a transaction's or a reserved connection's sql: every delivery would run on that one connection. Pass the sql that postgres(…) returned; the store opens sql.begin() per delivery and hands its transaction to the handler as context.tx`,
    );
  }
}
