// The speed mechanisms of the Kysely seam on node-postgres, all in this folder and behind two small interfaces,
// so that deleting the folder (and the one import of pgFastPaths in kysely-seam.ts) leaves a correct, plain store:
//
//   PgFastPaths        BEGIN sent in the same round trip as the transaction's first statement (the claim), and
//                      COMMIT's command tag read, which tells a commit from Postgres' ROLLBACK of an aborted
//                      transaction without a probe statement first;
//   StatementFastPath  a statement handler's delivery, or batch, in one round trip (statement-once.ts).
//
// How: Kysely's PostgresConnection hands `compiledQuery.sql` straight to `pg.Client#query`, which accepts a
// Submittable (the documented extension point of pg-cursor and pg-query-stream). We pass a `pg.Query` for a
// multi-statement simple query, which keeps every statement's result and command tag. docs/core.md ("What each
// mechanism buys") gives the A/B figure that keeps each.

import { CompiledQuery, type DatabaseConnection, type QueryExecutor } from 'kysely';
import type { Logger } from '../../consumer-types.js';
import type { SqlRow, SqlStatement, StatementFastPath } from '../../postgres/sql-seam.js';
import type { Hold, PipelineRunner } from './pipeline-runner.js';
import { literalStatement } from '../../postgres/sql-literal.js';
import { StatementOnce } from './statement-once.js';

/** BEGIN with the first statement, and COMMIT with its tag. */
export interface PgFastPaths {
  /** Sends `BEGIN` and `first` in one round trip; resolves to `first`'s rows. */
  begin(connection: DatabaseConnection, first: SqlStatement): Promise<SqlRow[]>;
  /** Sends COMMIT; resolves to its command tag (`ROLLBACK` when the transaction had been aborted). */
  commit(connection: DatabaseConnection): Promise<string | undefined>;
}

/** What the seam asks of this folder. */
export interface PgFastPathsProbe {
  /** The fast paths, once known to apply to this executor's connections; `undefined` when they do not. */
  known(): Promise<PgFastPaths | undefined>;
  /** The one-round-trip path of statement handlers, unless the options turned it off. */
  readonly statements: StatementFastPath | undefined;
}

/**
 * The fast paths over `executor`, probed on first use: node-postgres under Kysely's PostgresDialect. Other
 * drivers (PGlite …) get none.
 */
export function pgFastPaths(
  executor: QueryExecutor,
  hold: Hold,
  options: { readonly preparedStatements?: boolean; readonly temporaryFunctions?: boolean; readonly logger: Logger },
): PgFastPathsProbe {
  let probing: Promise<{ readonly paths: PgFastPaths; readonly runner: PipelineRunner } | undefined> | undefined;
  const probe = (): NonNullable<typeof probing> =>
    (probing ??= probeRunner(executor).then(
      (runner) => (runner === undefined ? undefined : { paths: wire(runner), runner }),
      (): undefined => {
        probing = undefined; // could not even connect: decide on the next call
        return undefined;
      },
    ));
  const off = options.temporaryFunctions === false || options.preparedStatements === false;
  return {
    known: async () => (await probe())?.paths,
    statements: off ? undefined : new StatementOnce(hold, async () => (await probe())?.runner, options.logger),
  };
}

function wire(runner: PipelineRunner): PgFastPaths {
  return {
    begin: async (connection, first) => (await runner(connection, `BEGIN;\n${literalStatement(first)}`))[1]?.rows ?? [],
    commit: async (connection) => (await runner(connection, 'COMMIT'))[0]?.command,
  };
}

type PgQuery = {
  callback?: (error: Error | null, results: unknown) => void;
  then?: (onFulfilled: (v: unknown) => unknown, onRejected: (e: unknown) => unknown) => Promise<unknown>;
  toString?: () => string;
};

/** The runner when `executor`'s connections are node-postgres and it works there (checked once), else undefined. */
async function probeRunner(executor: QueryExecutor): Promise<PipelineRunner | undefined> {
  let Query: new (config: string | { text: string; queryMode: 'extended' }) => PgQuery;
  try {
    const pg = (await import('pg')) as unknown as { default?: { Query?: unknown }; Query?: unknown };
    const found = pg.default?.Query ?? pg.Query;
    if (typeof found !== 'function') return undefined;
    Query = found as typeof Query;
  } catch {
    return undefined;
  }
  const runner: PipelineRunner = async (connection, sql, extended) => {
    // (A string, not a config object: pg clones a config object, property by property, on every query.)
    const query = new Query(extended === true ? { text: sql, queryMode: 'extended' } : sql);
    const done = new Promise<unknown>((resolve, reject) => {
      query.callback = (error, results) => (error ? reject(error) : resolve(results));
    });
    // Kysely awaits what pg.Client#query returns, which for a Submittable is the Submittable itself.
    query.then = (onFulfilled, onRejected) => done.then(() => ({ rows: [] })).then(onFulfilled, onRejected);
    query.toString = () => sql; // for Kysely's query log
    await connection.executeQuery({ ...CompiledQuery.raw(sql), sql: query as unknown as string });
    const results = await done;
    return (Array.isArray(results) ? (results as unknown[]) : [results]).map((r) => {
      const result = r as { command?: string; rows?: SqlRow[] } | undefined;
      return { command: result?.command, rows: result?.rows ?? [] };
    });
  };
  return executor.provideConnection(async (connection) => {
    // Only Kysely's PostgresDialect connection passes `sql` to pg.Client#query untouched; other drivers (PGlite
    // …) are never handed a Submittable, which could confuse their protocol state.
    if (connection.constructor?.name !== 'PostgresConnection') return undefined;
    try {
      const results = await runner(connection, 'SELECT 1 AS a; SELECT 2 AS b');
      return results.length === 2 && results[1]?.rows[0]?.['b'] === 2 ? runner : undefined;
    } catch {
      return undefined;
    }
  });
}
