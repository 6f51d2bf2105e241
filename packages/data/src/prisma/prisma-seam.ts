// Prisma: the handler's `context.tx` is the transaction client of an interactive transaction
// (`prisma.$transaction(async (tx) => …)`), typed with the application's models. Prisma 7 reaches Postgres
// through a driver adapter (@prisma/adapter-pg); the store's statements run through `tx.$queryRawUnsafe`.
// Prisma commits a transaction in which a statement failed without saying that Postgres rolled it back, and
// keeps its connection to itself, so the seam asks (`SELECT 1` fails in an aborted transaction) before it lets
// Prisma commit: one round trip more per delivery than the adapters that can read the client's state.

import { ConfigurationError } from '@inboxkit/core';
import {
  PostgresInboxStore,
  type InboxStoreOptions,
  type SqlRow,
  type SqlSeam,
} from '@inboxkit/core/postgres';
import { librarySeam } from '../library-seam.js';
import { refusingPrisma } from '../refuse-control.js';
import { findSqlState } from '../postgres-error.js';

/** The slice of a PrismaClient the seam uses. */
export interface PrismaClientLike {
  $queryRawUnsafe(query: string, ...values: unknown[]): PromiseLike<unknown>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any transaction client, any result
  $transaction(fn: (tx: any) => Promise<any>, options?: PrismaTransactionOptions): PromiseLike<any>;
}

/** The transaction client `prisma.$transaction(fn)` hands `fn`: what handlers get as `context.tx`. */
export type PrismaTransaction<C extends PrismaClientLike> = Parameters<
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the function form of the overloads
  Extract<Parameters<C['$transaction']>[0], (...args: any[]) => unknown>
>[0];

/** Options of Prisma's interactive transactions. */
export interface PrismaTransactionOptions {
  /** How long to wait for a connection. Default is Prisma's (2 s). */
  readonly maxWait?: number;
  /**
   * How long the transaction (claim, handler, commit) may take before Prisma rolls it back. Default is 30 s (the
   * handler timeout's default), not Prisma's 5 s.
   */
  readonly timeout?: number;
}

/** Options of the Prisma seam. */
export interface PrismaSeamOptions {
  /** Passed to `prisma.$transaction`. Default is `{ timeout: 30_000 }`. */
  readonly transaction?: PrismaTransactionOptions;
}

/**
 * The seam over a PrismaClient on Postgres (Prisma 7 with `@prisma/adapter-pg`, or 6 with driver adapters):
 * each transaction is an interactive `$transaction`, and handlers get its transaction client as `context.tx`.
 * Throws a `ConfigurationError` for a transaction client (every delivery would share its transaction) and for
 * a client of another database.
 *
 * @example
 * const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString }) });
 * const store = new PostgresInboxStore({ seam: prismaSeam(prisma) });
 * idempotentConsumer({ name: 'orders', store, handler: async (m, { tx }) => { await tx.order.create({ data: { id: m.id } }); } });
 */
export function prismaSeam<C extends PrismaClientLike>(
  prisma: C,
  options: PrismaSeamOptions = {},
): SqlSeam<PrismaTransaction<C>> {
  checkClient(prisma);
  const transactionOptions = { timeout: 30_000, ...options.transaction };
  const run = async (
    client: PrismaClientLike,
    sql: string,
    parameters: readonly unknown[],
  ): Promise<SqlRow[]> => (await client.$queryRawUnsafe(sql, ...parameters)) as SqlRow[];
  return librarySeam<PrismaTransaction<C>>({
    query: (statement) => run(prisma, statement.sql, statement.parameters),
    transaction: (fn, _first, watch) =>
      Promise.resolve(
        prisma.$transaction(
          (tx: PrismaTransaction<C> & PrismaClientLike) =>
            fn({
              tx: refusingPrisma(tx, watch),
              query: (statement) => run(tx, statement.sql, statement.parameters),
              aborted: async () => {
                try {
                  await run(tx, 'SELECT 1', []);
                  return false;
                } catch (error) {
                  if (findSqlState(error) === '25P02') return true;
                  throw error;
                }
              },
            }),
          transactionOptions,
        ),
      ),
  });
}

/** Options of `prismaInboxStore`. */
export interface PrismaInboxStoreOptions<C extends PrismaClientLike>
  extends InboxStoreOptions, PrismaSeamOptions {
  /** The application's PrismaClient. Never disconnected here. */
  readonly prisma: C;
}

/**
 * The Postgres inbox over Prisma: `new PostgresInboxStore({ seam: prismaSeam(prisma) })` with the table options.
 *
 * @example
 * const store = prismaInboxStore({ prisma, schema: 'inboxkit' });
 */
export function prismaInboxStore<C extends PrismaClientLike>(
  options: PrismaInboxStoreOptions<C>,
): PostgresInboxStore<unknown, PrismaTransaction<C>> {
  return new PostgresInboxStore<unknown, PrismaTransaction<C>>({
    ...options,
    seam: prismaSeam(options.prisma, options),
  });
}

function checkClient(prisma: PrismaClientLike): void {
  const candidate = prisma as Partial<PrismaClientLike> & { _activeProvider?: unknown };
  if (typeof candidate?.$queryRawUnsafe !== 'function') {
    throw new ConfigurationError(
      'prismaSeam needs a PrismaClient: new PrismaClient({ adapter: new PrismaPg({ connectionString }) })',
    );
  }
  if (typeof candidate.$transaction !== 'function') {
    throw new ConfigurationError(
      "prismaSeam was given an interactive transaction's client: every delivery would run in that one transaction. Pass the PrismaClient itself; the store opens a $transaction per delivery and hands its client to the handler as context.tx",
    );
  }
  const provider = candidate._activeProvider;
  if (typeof provider === 'string' && provider !== 'postgresql' && provider !== 'postgres') {
    throw new ConfigurationError(
      `prismaSeam needs a PrismaClient on Postgres (provider postgresql), got ${JSON.stringify(provider)}: the inbox lives in Postgres`,
    );
  }
}
