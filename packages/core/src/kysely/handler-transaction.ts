// The Kysely `Transaction<DB>` a handler receives. The store sends BEGIN and COMMIT itself (BEGIN shares a
// round trip with the claim), so the transaction object is built over the store's connection with the
// application's own executor — its plugins (CamelCasePlugin …) and logging apply to the handler's queries.

import {
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SingleConnectionProvider,
  Transaction,
  type ConnectionProvider,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type QueryExecutor,
} from 'kysely';

const NESTED = 'inboxkit: the handler already runs inside a transaction; use context.tx (nested transactions and savepoints are not offered)';

const refusingDriver: Driver = {
  init: async () => {},
  acquireConnection: () => Promise.reject(new Error(NESTED)),
  beginTransaction: () => Promise.reject(new Error(NESTED)),
  commitTransaction: () => Promise.reject(new Error(NESTED)),
  rollbackTransaction: () => Promise.reject(new Error(NESTED)),
  releaseConnection: async () => {},
  destroy: async () => {},
};

const dialect: Dialect = {
  createAdapter: () => new PostgresAdapter(),
  createDriver: () => refusingDriver,
  createQueryCompiler: () => new PostgresQueryCompiler(),
  createIntrospector: (db) => new PostgresIntrospector(db),
};

/** A handler's transaction: usable until `close()`, then every query is refused. */
export class HandlerTransaction<DB> {
  readonly tx: Transaction<DB>;
  #closed = false;
  #used = false;
  #provider: Promise<ConnectionProvider> | undefined;

  /**
   * @param executor the application's executor (from `db.getExecutor()`), whose plugins apply.
   * @param connection the store's connection, already inside BEGIN — or a function that opens it on first use.
   */
  constructor(executor: QueryExecutor, connection: () => Promise<DatabaseConnection>) {
    const provider: ConnectionProvider = {
      provideConnection: async (consumer) => {
        if (this.#closed) {
          throw new Error('inboxkit: the handler transaction has ended; use context.tx only while the handler runs');
        }
        this.#used = true;
        this.#provider ??= connection().then((c) => new SingleConnectionProvider(c));
        return (await this.#provider).provideConnection(consumer);
      },
    };
    this.tx = new Transaction<DB>({
      config: { dialect },
      driver: refusingDriver,
      executor: executor.withConnectionProvider(provider),
      dialect,
    });
  }

  /** True once the handler ran a query. */
  get used(): boolean {
    return this.#used;
  }

  close(): void {
    this.#closed = true;
  }
}
