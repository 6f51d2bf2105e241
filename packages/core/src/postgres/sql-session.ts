// One borrowed connection and the few ways the store talks over it: a statement, several statements in one
// round trip where the driver allows it (node-postgres), and transaction control that notices an aborted
// transaction instead of reporting a commit that did not happen.

import { CompiledQuery, type DatabaseConnection, type QueryExecutor } from 'kysely';
import { StoreUnavailableError } from '../errors.js';
import { ConnectionGuard } from './held-connection.js';
import { completedRows, type PipelineRunner, type Rows } from './pipelined-query.js';

export class SqlSession {
  readonly connection: DatabaseConnection;
  readonly #runner: PipelineRunner | undefined;
  readonly #guard: ConnectionGuard | undefined;
  /** True between a BEGIN sent through this session and its COMMIT or ROLLBACK. */
  #open = false;
  /** A ROLLBACK owed to Postgres, sent in front of this session's next statement (see `deferRollback`). */
  #rollbackOwed = false;

  constructor(connection: DatabaseConnection, runner: PipelineRunner | undefined, guard?: ConnectionGuard) {
    this.connection = connection;
    this.#runner = runner;
    this.#guard = guard;
  }

  /** True once the backend went away while the session held the connection (see held-connection.ts). */
  get broken(): boolean {
    return this.#guard?.broken === true;
  }

  /**
   * Throws `StoreUnavailableError` when the connection was lost while held: a handler that failed meanwhile
   * failed because of the store, not of itself, and its delivery must be retried without counting an attempt.
   */
  assertAlive(): void {
    if (this.#guard?.broken !== true) return;
    const cause = this.#guard.error;
    const detail = cause instanceof Error ? cause.message : String(cause);
    throw new StoreUnavailableError(`the connection to Postgres was lost while the handler ran: ${detail}`, { cause });
  }

  /** True when several statements can share one round trip. */
  get pipelined(): boolean {
    return this.#runner !== undefined;
  }

  /** True while a transaction this session began is open: it must be ended before the connection goes back. */
  get inTransaction(): boolean {
    return this.#open;
  }

  async query(sql: string): Promise<Rows> {
    if (this.#rollbackOwed) return (await this.#pipelined([sql]))[0]!;
    this.#track([sql]);
    return (await this.connection.executeQuery(CompiledQuery.raw(sql))).rows as Rows;
  }

  /** Runs `statements` in order, stopping at the first error; one round trip when pipelined. */
  async all(statements: readonly string[]): Promise<Rows[]> {
    if (this.#rollbackOwed || (this.#runner !== undefined && statements.length > 1)) return this.#pipelined(statements);
    const out: Rows[] = [];
    for (const statement of statements) out.push(await this.query(statement));
    return out;
  }

  /**
   * Sends `statements` in one round trip through the runner (set whenever this is called), with an owed
   * ROLLBACK (`deferRollback`) in front; the ROLLBACK's empty result is dropped.
   */
  async #pipelined(statements: readonly string[]): Promise<Rows[]> {
    const owed = this.#rollbackOwed;
    this.#rollbackOwed = false;
    const sent = owed ? ['ROLLBACK', ...statements] : statements;
    this.#track(sent);
    const rows = await this.#runner!(this.connection, sent.join(';\n'));
    return owed ? rows.slice(1) : rows;
  }

  /**
   * Sends the rest of an open transaction, `COMMIT` last, in one round trip (the session must be pipelined), and
   * resolves to Postgres' error, if any. Postgres stops at the first failing statement and skips the rest: the
   * transaction then stays open and aborted (`inTransaction`), unless the COMMIT itself failed (a deferred
   * constraint), which ends it. A failure of the connection rejects.
   */
  async finish(statements: readonly string[]): Promise<unknown> {
    const owed = this.#rollbackOwed ? 1 : 0;
    try {
      await this.#pipelined(statements);
      return undefined;
    } catch (error) {
      const done = completedRows(error);
      if (done === undefined) throw error; // not Postgres' answer: the connection's failure
      if (done.length - owed < statements.length - 1) this.#open = true;
      return error;
    }
  }

  /** Notes transaction control statements (before sending: a failed COMMIT or ROLLBACK still ends it). */
  #track(statements: readonly string[]): void {
    for (const statement of statements) {
      if (statement === 'BEGIN') this.#open = true;
      else if (statement === 'COMMIT' || statement === 'ROLLBACK') this.#open = false;
    }
  }

  /**
   * Runs `statements`, then `followUp` — in the same round trip when pipelined, otherwise only when the last
   * statement returned no rows. The follow-up's rows are `undefined` when it was skipped.
   */
  async withFollowUp(statements: readonly string[], followUp: string): Promise<{ rows: Rows[]; followUp: Rows | undefined }> {
    if (this.#runner !== undefined) {
      const rows = await this.#pipelined([...statements, followUp]);
      return { rows: rows.slice(0, statements.length), followUp: rows[statements.length] };
    }
    const rows = await this.all(statements);
    const last = rows[rows.length - 1];
    return { rows, followUp: last !== undefined && last.length > 0 ? undefined : await this.query(followUp) };
  }

  /**
   * Commits. Resolves false when Postgres reports the transaction was already aborted (a handler swallowed a
   * failed statement): nothing was committed. Other drivers get a probe first, since not every driver reports
   * COMMIT's ROLLBACK tag.
   */
  async commit(): Promise<boolean> {
    if (this.#runner === undefined) {
      try {
        await this.query('SELECT 1');
      } catch (error) {
        if (sqlState(error) === '25P02') {
          await this.rollbackQuietly();
          return false;
        }
        throw error;
      }
    }
    const rows = await this.query('COMMIT');
    return (rows[0] as { command?: unknown } | undefined)?.command !== 'ROLLBACK';
  }

  async rollback(): Promise<void> {
    this.#rollbackOwed = false;
    await this.query('ROLLBACK');
  }

  /**
   * Ends a transaction that wrote nothing (a claim that took no row) without waiting for the answer, on
   * node-postgres: the client sends queries in order, so the ROLLBACK reaches Postgres before anything the
   * connection's next borrower sends, and the caller saves a round trip. A failure is the connection's, and its
   * next user meets it. Elsewhere (PGlite …) it waits.
   */
  async rollbackUnawaited(): Promise<void> {
    if (this.#runner === undefined) return this.rollbackQuietly();
    this.#rollbackOwed = false;
    this.#track(['ROLLBACK']);
    this.connection.executeQuery(CompiledQuery.raw('ROLLBACK')).catch(() => undefined);
  }

  /**
   * Ends a transaction that wrote nothing by sending its ROLLBACK in front of this session's next statement, in
   * the same round trip, instead of on its own; the holder must then either send a next statement or call
   * `rollbackUnawaited`. On a connection without pipelining, the ROLLBACK is sent now (`rollbackUnawaited`).
   * Returns true when the ROLLBACK was deferred.
   */
  deferRollback(): boolean {
    if (this.#runner === undefined || !this.#open) return false;
    this.#rollbackOwed = true;
    return true;
  }

  /** True while a ROLLBACK is owed (see `deferRollback`). */
  get rollbackOwed(): boolean {
    return this.#rollbackOwed;
  }

  /** Rolls back, ignoring errors (the connection may already be gone; the pool will notice). */
  async rollbackQuietly(): Promise<void> {
    this.#rollbackOwed = false;
    try {
      await this.query('ROLLBACK');
    } catch {
      // The transaction dies with the connection anyway.
    }
  }
}

/** A connection held across a handler's run, opened (and BEGIN sent) only on first use. */
export class LazySession {
  readonly #executor: QueryExecutor;
  readonly #runner: PipelineRunner | undefined;
  #session: Promise<SqlSession> | undefined;
  #release: (() => void) | undefined;
  #held: Promise<unknown> | undefined;

  constructor(executor: QueryExecutor, runner: PipelineRunner | undefined) {
    this.#executor = executor;
    this.#runner = runner;
  }

  get started(): boolean {
    return this.#session !== undefined;
  }

  /** The session, inside BEGIN. */
  begin(): Promise<SqlSession> {
    this.#session ??= new Promise<SqlSession>((resolve, reject) => {
      this.#held = this.#executor
        .provideConnection((connection) =>
          holding(connection, this.#runner, async (session) => {
            await session.query('BEGIN');
            resolve(session);
            await new Promise<void>((done) => (this.#release = done));
          }),
        )
        .catch(reject);
    });
    return this.#session;
  }

  /** Gives the connection back to the pool. */
  async release(): Promise<void> {
    this.#release?.();
    await this.#held;
  }
}

/**
 * Runs `fn` over a session on `connection`, guarded on node-postgres (`runner` set) for as long as it runs;
 * never hands the connection back inside a transaction.
 */
export async function holding<T>(
  connection: DatabaseConnection,
  runner: PipelineRunner | undefined,
  fn: (session: SqlSession) => Promise<T>,
): Promise<T> {
  const guard = runner === undefined ? undefined : new ConnectionGuard();
  const holding = guard?.hold(connection);
  if (holding !== undefined) await holding;
  const session = new SqlSession(connection, runner, guard);
  try {
    return await fn(session);
  } finally {
    try {
      if (session.inTransaction) await session.rollbackQuietly();
    } finally {
      guard?.release();
    }
  }
}

/** The SQLSTATE of a Postgres error, if any. */
export function sqlState(error: unknown): string | undefined {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? code : undefined;
}
