// Several statements in one round trip on a node-postgres connection that Kysely lent us. Kysely's
// PostgresConnection hands `compiledQuery.sql` straight to `pg.Client#query`, which accepts a Submittable (the
// documented extension point of pg-cursor and pg-query-stream): we pass a `pg.Query` for a multi-statement
// simple query that keeps every statement's result and is awaitable. That is what lets BEGIN, SET LOCAL, the
// claim and its state read share one round trip. Drivers other than node-postgres (PGlite, postgres.js …) fail
// the probe in PostgresInboxStore and get one round trip per statement instead.

import { CompiledQuery, type DatabaseConnection } from 'kysely';

/** Rows of one statement. */
export type Rows = Record<string, unknown>[];

/** Sends `sql` (statements separated by `;`) in one round trip; resolves to each statement's rows. */
export type PipelineRunner = (connection: DatabaseConnection, sql: string) => Promise<Rows[]>;

/** The slice of `pg.Query` used here. */
interface PgQuery {
  callback?: (error: Error | null, results: unknown) => void;
}

type PgQueryClass = new (text: string) => PgQuery;

/** A runner over node-postgres, or `undefined` when `pg` cannot be loaded. */
export async function loadPgPipelineRunner(): Promise<PipelineRunner | undefined> {
  let QueryClass: PgQueryClass;
  try {
    const pg = (await import('pg')) as unknown as { default?: { Query?: PgQueryClass }; Query?: PgQueryClass };
    const found = pg.default?.Query ?? pg.Query;
    if (typeof found !== 'function') return undefined;
    QueryClass = found;
  } catch {
    return undefined;
  }
  return async (connection, sql) => {
    const query = new QueryClass(sql) as PgQuery & {
      then?: (onFulfilled: (v: unknown) => unknown, onRejected: (e: unknown) => unknown) => Promise<unknown>;
      toString?: () => string;
    };
    let results: unknown;
    const done = new Promise<void>((resolve, reject) => {
      query.callback = (error, value) => {
        if (error) reject(error);
        else {
          results = value;
          resolve();
        }
      };
    });
    // Kysely awaits what pg.Client#query returns, which for a Submittable is the Submittable itself.
    query.then = (onFulfilled, onRejected) =>
      done.then(() => ({ command: 'SELECT', rowCount: 0, rows: [] })).then(onFulfilled, onRejected);
    // For Kysely's query log, which prints `sql`.
    query.toString = () => sql;
    await connection.executeQuery({ ...CompiledQuery.raw(sql), sql: query as unknown as string });
    await done;
    const list = Array.isArray(results) ? (results as unknown[]) : [results];
    return list.map((r) => ((r as { rows?: Rows } | undefined)?.rows ?? []));
  };
}
