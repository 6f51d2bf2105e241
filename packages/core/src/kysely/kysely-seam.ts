// The Kysely data layer: the seam (../postgres/sql-seam.ts) over the application's Kysely instance (node-postgres
// or PGlite). It sits beside the store, not inside it, as packages/data's seams do for the other libraries; it
// is the one built in because core's migrations run on Kysely and `new PostgresInboxStore({ db })` builds it.
// Statements go through Kysely's own connections, and handlers get a Kysely `Transaction<DB>` over the store's
// connection with the application's plugins. On node-postgres the fast paths of ./fast apply (BEGIN sent with
// the claim, statement handlers in one round trip); without them (other drivers, `pipelining: 'off'`, or that
// folder deleted) every statement is a round trip of its own, with the same results.

import { CompiledQuery, type DatabaseConnection, type Kysely, type QueryExecutor, type Transaction } from 'kysely';
import type { Logger } from '../consumer-types.js';
import { silentLogger } from '../silent-logger.js';
import { pgFastPaths, type PgFastPaths, type PgFastPathsProbe } from './fast/pg-fast-paths.js';
import type { SqlRow, SqlSeam, SqlStatement, StatementFastPath, TransactionEnd, TransactionOptions, TransactionWork } from '../postgres/sql-seam.js';
import { HandlerTransaction } from './handler-transaction.js';
import { ConnectionGuard } from './held-connection.js';
import { TransactionControlError } from '../errors.js';
import { TransactionControlWatch } from '../postgres/transaction-control.js';

/** Options of the Kysely seam (and of `PostgresInboxStore({ db })`). */
export interface KyselySeamOptions {
  /**
   * `auto`: on node-postgres, send BEGIN and the claim in one round trip (detected once; other drivers get one
   * statement per round trip). `off`: one statement per round trip, and no other fast path. Default is `auto`.
   */
  readonly pipelining?: 'auto' | 'off';
  /** @deprecated The same as `temporaryFunctions` (`false` turns statement handlers' one-round-trip path off). */
  readonly preparedStatements?: boolean;
  /**
   * For statement handlers (`statementHandler`): create, once per connection, a small temporary PL/pgSQL function
   * (in the session's `pg_temp`; it goes away with the connection) that runs the claim and, only if it took the
   * delivery (or batch), its statements — prepared once per connection (`PREPARE`) — in one autocommit round
   * trip. Turn off where sessions may not create temporary objects or keep session state (PgBouncer in
   * transaction mode): their statements then run on the handler's transaction. The store turns it off by itself
   * (with a warning and the metric `inboxkit.store.fast_path_off`) when Postgres refuses it. Default is true.
   *
   * @example
   * const store = new PostgresInboxStore({ db, temporaryFunctions: false }); // statements on the handler's tx
   */
  readonly temporaryFunctions?: boolean;
  /** Where the store says it turned a fast path off. Default is a silent logger. */
  readonly logger?: Logger;
}

/**
 * The seam over `db`.
 *
 * @example
 * const store = new PostgresInboxStore({ seam: kyselySeam(db) });
 */
export function kyselySeam<DB>(db: Kysely<DB>, options: KyselySeamOptions = {}): SqlSeam<Transaction<DB>> {
  return new KyselySeam(db, options);
}

const ABORTED = 'the transaction was aborted by a failed statement: COMMIT committed nothing';

/** A connection held for one transaction or statement, guarded on node-postgres (held-connection.ts). */
class Held {
  #open = false;

  constructor(
    readonly connection: DatabaseConnection,
    readonly guard: ConnectionGuard | undefined,
    readonly fast: PgFastPaths | undefined,
  ) {}

  async query(statement: SqlStatement): Promise<SqlRow[]> {
    const result = await this.connection.executeQuery(CompiledQuery.raw(statement.sql, statement.parameters as unknown[]));
    return result.rows as SqlRow[];
  }

  /** BEGIN, then `first` — in one round trip when the fast path can. */
  async begin(first: SqlStatement | undefined): Promise<SqlRow[]> {
    this.#open = true;
    if (first !== undefined && this.fast !== undefined) return this.#watching(await this.fast.begin(this.connection, first));
    await this.connection.executeQuery(CompiledQuery.raw('BEGIN'));
    return this.#watching(first === undefined ? [] : await this.query(first));
  }

  /**
   * From BEGIN's answer on, an idle status means the transaction ended under the store. Not before: a
   * duplicate's ROLLBACK on this connection may still be answering (it is sent without waiting).
   */
  #watching<T>(value: T): T {
    if (this.guard !== undefined) this.guard.inTransaction = true;
    return value;
  }

  /** COMMIT; rejects with code 25P02 when Postgres found the transaction aborted and rolled it back instead. */
  async commit(): Promise<void> {
    if (this.fast !== undefined) {
      this.#open = false;
      if ((await this.fast.commit(this.connection)) === 'ROLLBACK') throw Object.assign(new Error(ABORTED), { code: '25P02' });
      return;
    }
    // Kysely reports no command tag: ask first (any statement fails in an aborted transaction).
    await this.query({ sql: 'SELECT 1', parameters: [] });
    this.#open = false;
    await this.connection.executeQuery(CompiledQuery.raw('COMMIT'));
  }

  async rollback(): Promise<void> {
    this.#open = false;
    await this.connection.executeQuery(CompiledQuery.raw('ROLLBACK'));
  }

  /** Ends a transaction that wrote nothing; on node-postgres without waiting (the client sends it before anything else). */
  async release(): Promise<void> {
    if (this.fast === undefined) return this.rollback();
    this.#open = false;
    this.connection.executeQuery(CompiledQuery.raw('ROLLBACK')).catch(() => undefined);
  }

  /** Ends whatever is left open, ignoring errors (the connection may be gone: the pool discards it). */
  async close(): Promise<void> {
    if (this.#open) await this.rollback().catch(() => undefined);
    this.guard?.release();
  }

  /**
   * Throws a TransactionControlError when Postgres reported the connection idle since BEGIN (node-postgres
   * only; read from the ReadyForQuery messages the guard already sees): something ended the transaction.
   */
  assertStillOpen(): void {
    if (this.guard === undefined) return;
    this.guard.inTransaction = false;
    if (this.guard.left) throw new TransactionControlError('a COMMIT or ROLLBACK the store did not send', 'unknown');
  }

  /** Throws when the backend went away while held, which the client could only report as an unheard event. */
  assertAlive(): void {
    if (this.guard?.broken !== true) return;
    const cause = this.guard.error;
    throw new Error(`the connection to Postgres was lost: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** `connection` as the handler's Transaction reaches it: statements that control the transaction are refused. */
function refusingControl(connection: DatabaseConnection, watch: TransactionControlWatch): DatabaseConnection {
  return {
    executeQuery: (query) => {
      const refused = watch.refuse(query.sql);
      return refused === undefined ? connection.executeQuery(query) : Promise.reject(refused);
    },
    streamQuery: (query, chunkSize) => {
      const refused = watch.refuse(query.sql);
      if (refused !== undefined) throw refused;
      return connection.streamQuery(query, chunkSize);
    },
  };
}

class KyselySeam<DB> implements SqlSeam<Transaction<DB>> {
  readonly #raw: QueryExecutor;
  readonly #app: QueryExecutor;
  readonly #fast: PgFastPathsProbe | undefined;
  readonly statementFastPath?: StatementFastPath;

  constructor(db: Kysely<DB>, options: KyselySeamOptions) {
    // The store's own statements must not meet the application's plugins (CamelCasePlugin would rename columns);
    // the handler's transaction gets them.
    this.#raw = db.withoutPlugins().getExecutor();
    this.#app = db.getExecutor();
    if (options.pipelining !== 'off') {
      const hold = <T>(fn: (connection: DatabaseConnection) => Promise<T>): Promise<T> => this.#hold((held) => fn(held.connection));
      this.#fast = pgFastPaths(this.#raw, hold, { ...options, logger: options.logger ?? silentLogger });
      if (this.#fast.statements !== undefined) this.statementFastPath = this.#fast.statements;
    }
  }

  async query(statement: SqlStatement): Promise<SqlRow[]> {
    return this.#hold((held) => held.query(statement));
  }

  async transaction<T>(work: TransactionWork<Transaction<DB>, T>, options: TransactionOptions = {}): Promise<T> {
    if (options.lazy !== true) {
      return this.#hold(async (held) => this.#run(work, await held.begin(options.first), async () => held, () => true));
    }
    // The connection taken, and BEGIN sent, on first use.
    let opened: Promise<Held> | undefined;
    let letGo = (): void => {};
    let holding: Promise<unknown> = Promise.resolve();
    const open = (): Promise<Held> =>
      (opened ??= new Promise<Held>((resolve, reject) => {
        holding = this.#hold(async (held) => {
          await held.begin(undefined);
          resolve(held);
          await new Promise<void>((done) => (letGo = done));
        }).catch(reject);
      }));
    try {
      return await this.#run(work, [], open, () => opened !== undefined);
    } finally {
      letGo(); // #hold ends whatever is still open
      await holding;
    }
  }

  async #run<T>(work: TransactionWork<Transaction<DB>, T>, first: SqlRow[], held: () => Promise<Held>, used: () => boolean): Promise<T> {
    // Every statement the handler sends through its Transaction is looked at first: COMMIT, ROLLBACK … are refused.
    const watch = new TransactionControlWatch();
    const handler = new HandlerTransaction<DB>(this.#app, async () => refusingControl((await held()).connection, watch));
    let end;
    try {
      end = await work({ tx: handler.tx, query: async (s) => (await held()).query(s), transactionControl: () => watch.take() }, first);
    } catch (error) {
      handler.close();
      if (used()) await this.#end(await held(), 'rollback');
      throw watch.take() ?? error;
    }
    handler.close();
    const control = watch.take();
    if (used()) await this.#end(await held(), control === undefined ? end.end : 'rollback');
    if (control !== undefined) throw control;
    return end.value;
  }

  async #end(held: Held, end: TransactionEnd): Promise<void> {
    // A handler that failed because its backend died failed because of the store: ask before ending and after,
    // since the end of the socket may only come now.
    held.assertAlive();
    try {
      held.assertStillOpen();
    } catch (error) {
      await held.rollback();
      throw error;
    }
    if (end === 'commit') await held.commit();
    else if (end === 'rollback') await held.rollback();
    else await held.release();
    held.assertAlive();
  }

  /** Borrows a connection for `fn`, guarded while held; never hands it back inside a transaction. */
  async #hold<T>(fn: (held: Held) => Promise<T>): Promise<T> {
    const fast = await this.#fast?.known();
    return this.#raw.provideConnection(async (connection) => {
      const guard = connection.constructor?.name === 'PostgresConnection' ? new ConnectionGuard() : undefined;
      await guard?.hold(connection);
      const held = new Held(connection, guard, fast);
      try {
        return await fn(held);
      } finally {
        await held.close();
      }
    });
  }
}
