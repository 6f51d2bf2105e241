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

/** Rows of the statements that completed before a pipeline's error, by that error (see `completedRows`). */
const completed = new WeakMap<object, Rows[]>();

/**
 * The rows of the statements of a pipeline that completed before it failed with `error` (Postgres skips the rest
 * of a multi-statement query after an error); `undefined` for an error that did not come from a pipeline.
 */
export function completedRows(error: unknown): Rows[] | undefined {
  return typeof error === 'object' && error !== null ? completed.get(error) : undefined;
}

/** The results a `pg.Query` gathered so far, kept only for statements Postgres reported complete. */
function resultsSoFar(query: object): Rows[] {
  // `_results` is the Query's own accumulator (one Result, or an array once a second statement answered), the
  // field it hands to its callback on success; on an error pg calls the callback without it.
  const gathered = (query as { _results?: unknown })._results;
  const list = Array.isArray(gathered) ? (gathered as unknown[]) : gathered === undefined ? [] : [gathered];
  return list
    .filter((r) => typeof (r as { command?: unknown }).command === 'string')
    .map((r) => (r as { rows?: Rows }).rows ?? []);
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
        if (error) {
          if (typeof error === 'object') completed.set(error, resultsSoFar(query));
          reject(error);
        } else {
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

/** node-postgres' conversion of a query parameter to what it sends (text, a Buffer, or null). */
export type ParameterText = (value: unknown) => unknown;

/** node-postgres' own parameter conversion (`prepareValue`), or `undefined` when it cannot be loaded. */
export async function loadPgParameterText(): Promise<ParameterText | undefined> {
  try {
    const path = 'pg/lib/utils.js'; // not in pg's types; its package exports ./lib/*
    const utils = (await import(path)) as { prepareValue?: unknown; default?: { prepareValue?: unknown } };
    const prepare = utils.prepareValue ?? utils.default?.prepareValue;
    return typeof prepare === 'function' ? (prepare as ParameterText) : undefined;
  } catch {
    return undefined;
  }
}
