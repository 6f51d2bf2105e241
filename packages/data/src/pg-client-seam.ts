// The SqlSeam over a node-postgres pool whose client the seam holds itself: node-postgres, and Drizzle on
// node-postgres. The seam sends BEGIN and COMMIT, so it can do what a library's transaction callback cannot:
// send BEGIN in the same round trip as the claim (one simple-protocol query, parameters as literals), and read
// COMMIT's command tag, which tells a commit from Postgres' ROLLBACK of an aborted transaction with no extra
// statement. The handler gets the library's transaction object built over the held client.

import { findTransactionControl, TransactionControlError } from '@inboxkit/core';
import {
  literalStatement,
  TransactionControlWatch,
  registerTransactionQuery,
  type SqlRow,
  type SqlSeam,
  type SqlStatement,
  type TransactionEnd,
  type TransactionOptions,
  type TransactionWork,
} from '@inboxkit/core/postgres';
import type pg from 'pg';
import { abortedTransactionError, postgresError } from './postgres-error.js';

/** Options of the seams over a node-postgres pool. */
export interface PgClientSeamOptions {
  /**
   * `auto`: send BEGIN and the claim in one round trip (a simple-protocol query, its parameters written as SQL
   * literals). `off`: BEGIN on its own, then the claim with bind parameters. Default is `auto`.
   */
  readonly pipelining?: 'auto' | 'off';
}

/** The slice of a `pg.Pool` the seam uses. */
export type PgPool = Pick<pg.Pool, 'connect' | 'query'>;

/**
 * The seam over `pool`, whose handlers get `txOf(client)`: the library's transaction object over the client the
 * seam holds, inside BEGIN.
 */
export function pgClientSeam<Tx>(
  pool: PgPool,
  txOf: (client: pg.PoolClient) => Tx | Promise<Tx>,
  options: PgClientSeamOptions = {},
): SqlSeam<Tx> {
  const pipelining = options.pipelining !== 'off';
  return {
    async query(statement) {
      try {
        return (await pool.query(statement.sql, statement.parameters as unknown[])).rows as SqlRow[];
      } catch (error) {
        throw postgresError(error);
      }
    },
    async transaction<T>(work: TransactionWork<Tx, T>, options: TransactionOptions = {}): Promise<T> {
      const held = new HeldClient(await connect(pool));
      const watch = new TransactionControlWatch();
      try {
        const first = await held.begin(options.first, pipelining);
        const tx = await txOf(held.client);
        const query = (statement: SqlStatement): Promise<SqlRow[]> => held.query(statement);
        const close = registerTransactionQuery(tx, query);
        const unwatch = held.refuseControl(watch);
        let end;
        try {
          end = await work({ tx, query, transactionControl: () => watch.take() }, first);
        } catch (error) {
          unwatch();
          close();
          await held.end('rollback');
          throw watch.take() ?? error;
        }
        unwatch();
        close();
        const control = watch.take();
        await held.end(control === undefined ? end.end : 'rollback');
        if (control !== undefined) throw control;
        return end.value;
      } catch (error) {
        throw findTransactionControl(error) ?? postgresError(error);
      } finally {
        held.release();
      }
    },
  };
}

async function connect(pool: PgPool): Promise<pg.PoolClient> {
  try {
    return await pool.connect();
  } catch (error) {
    throw postgresError(error);
  }
}

/** A client held for one transaction: listened to while held, discarded by the pool if it broke. */
class HeldClient {
  #open = false;
  #broken: unknown;
  #isBroken = false;
  readonly #onError = (error: unknown): void => {
    // A backend that dies while held (a restart, pg_terminate_backend) is reported as an 'error' event, which
    // would end the process unheard; the pending query fails too, and the seam reports that.
    this.#isBroken = true;
    this.#broken = error;
  };

  constructor(readonly client: pg.PoolClient) {
    client.on('error', this.#onError);
  }

  async query(statement: SqlStatement): Promise<SqlRow[]> {
    this.#assertAlive();
    return (await this.#send(statement.sql, statement.parameters as unknown[])).rows as SqlRow[];
  }

  /**
   * Until the returned function is called, the client's `query` — what the handler's `tx` sends through —
   * refuses statements that control the transaction (never sent); the store's own statements bypass it.
   */
  refuseControl(watch: TransactionControlWatch): () => void {
    const target = this.client as unknown as { query: (...args: unknown[]) => unknown };
    const own = Object.prototype.hasOwnProperty.call(target, 'query');
    const original = target.query;
    this.#query = (text, values) => original.call(target, text, values) as Promise<pg.QueryResult>;
    target.query = function (this: unknown, ...args: unknown[]): unknown {
      const head = args[0] as string | { text?: unknown } | undefined;
      const refused = watch.refuse(typeof head === 'string' ? head : head?.text);
      if (refused === undefined) return original.apply(this, args);
      const callback = args.at(-1);
      if (typeof callback === 'function') {
        queueMicrotask(() => (callback as (error: unknown) => void)(refused));
        return undefined;
      }
      return Promise.reject(refused);
    };
    return () => {
      this.#query = undefined;
      if (own) target.query = original;
      else delete (target as { query?: unknown }).query;
    };
  }

  /** The client's own `query` (not the handler's refusing one). */
  #query: ((text: string, values?: unknown[]) => Promise<pg.QueryResult>) | undefined;

  #send(text: string, values?: unknown[]): Promise<pg.QueryResult> {
    return this.#query !== undefined ? this.#query(text, values) : this.client.query(text, values);
  }

  /** BEGIN, then `first`: in one round trip when pipelining. Rolls back (and rejects) when `first` fails. */
  async begin(first: SqlStatement | undefined, pipelining: boolean): Promise<SqlRow[]> {
    this.#open = true;
    if (first === undefined) {
      await this.client.query('BEGIN');
      return [];
    }
    if (!pipelining) {
      await this.client.query('BEGIN');
      return this.query(first);
    }
    const results = (await this.client.query(
      `BEGIN;\n${literalStatement(first)}`,
    )) as unknown as pg.QueryResult[];
    return (results[1]?.rows ?? []) as SqlRow[];
  }

  /** Ends the transaction; rejects with code 25P02 when Postgres answered COMMIT with a ROLLBACK. */
  async end(end: TransactionEnd): Promise<void> {
    this.#assertAlive();
    // Postgres reports the transaction status with every ReadyForQuery (node-postgres ≥ 8.16 keeps it): idle
    // here means something ended the transaction the store opened. No round trip.
    if (this.client.getTransactionStatus?.() === 'I') {
      this.#open = false;
      throw new TransactionControlError('a COMMIT or ROLLBACK the store did not send', 'unknown');
    }
    this.#open = false;
    if (end === 'commit') {
      const result = await this.client.query('COMMIT');
      if (result.command === 'ROLLBACK') throw abortedTransactionError();
    } else if (end === 'rollback') {
      await this.client.query('ROLLBACK');
    } else {
      // Nothing was written: the client sends the ROLLBACK before any later query, so no need to wait for it.
      this.client.query('ROLLBACK').catch(() => undefined);
    }
    this.#assertAlive();
  }

  /** Hands the client back: ends what is left open first (a failed BEGIN or claim), discards it if it broke. */
  release(): void {
    if (this.#open && !this.#isBroken) {
      this.#open = false;
      this.client.query('ROLLBACK').catch(() => undefined);
    }
    this.client.removeListener('error', this.#onError);
    this.client.release(this.#isBroken ? (this.#broken instanceof Error ? this.#broken : true) : undefined);
  }

  #assertAlive(): void {
    if (!this.#isBroken) return;
    const cause = this.#broken;
    throw new Error(
      `the connection to Postgres was lost: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
  }
}
