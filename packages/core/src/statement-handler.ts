// A handler whose whole effect is SQL statements built from the message alone. Because no JS has to run between
// the claim and the effect, the Postgres store can send the statements with the claim: one round trip for a
// delivery instead of three (a function in the session's pg_temp claims and, only if it took the delivery, runs
// them), and one for a whole batch (another function does the same for every message of the batch). Where it cannot (the first use of a
// statement on a connection, another store, …) the statements simply run in order on `context.tx`, like any
// handler's.

import type { Compilable, CompiledQuery } from 'kysely';
import type { MessageHandler } from './consumer-types.js';
import type { DecodedMessage } from './message.js';

/** What a statement handler builds: a Kysely query builder (anything with `compile()`) or a compiled query. */
export type EffectStatement = Compilable | CompiledQuery;

/** The builder of a statement handler: pure — it only builds queries, and may run more than once per delivery. */
export type StatementBuilder<P> = (message: DecodedMessage<P>) => EffectStatement | readonly EffectStatement[];

/** The transaction a statement handler runs its statements on when they do not go with the claim or COMMIT. */
export interface StatementTransaction {
  executeQuery(query: CompiledQuery | Compilable): Promise<unknown>;
}

const BUILDER = Symbol.for('inboxkit.statementBuilder');

/** A statement handler: a `MessageHandler` that also carries its builder, for the store to send its statements. */
export type StatementHandler<P, Tx extends StatementTransaction> = MessageHandler<P, Tx> & {
  readonly [BUILDER]: StatementBuilder<P>;
};

/**
 * Makes a handler out of SQL statements known from the message alone, for effects such as "insert the order",
 * "add to the balance", "upsert the projection row". The contract:
 *
 * - `build` only builds queries (Kysely builders or `CompiledQuery`s) from the decoded message. It must not
 *   touch anything else. It may be called before the claim (so a duplicate may build statements that never
 *   run) and more than once per delivery.
 * - The statements run in order in the claim's transaction and commit with the inbox record, or not at all —
 *   exactly like a handler doing `await tx.executeQuery(…)` for each.
 * - With `PostgresInboxStore` on node-postgres, a delivery is one round trip: a temporary PL/pgSQL function
 *   (created once per connection in `pg_temp`) claims it and, only if it took it, runs the statements, in one
 *   autocommit statement; a duplicate runs nothing. Each statement is prepared once per connection and
 *   executed with its parameters as literals. A batch (`handleBatch`) is one round trip too, through a second
 *   function. The first use of a statement on a connection (it is
 *   prepared afterwards), a statement Postgres cannot prepare on its own, a binary parameter, other drivers
 *   and other stores take the usual path: the statements run on `context.tx`. (`temporaryFunctions: false` on
 *   the store sends single deliveries' statements with the COMMIT instead: two round trips.)
 *
 * Throwing from `build`, or a statement failing, fails the attempt like a throwing handler.
 *
 * @example
 * const consumer = idempotentConsumer<OrderPlaced, Transaction<DB>>({
 *   name: 'orders',
 *   store: new PostgresInboxStore({ db }),
 *   schema: OrderPlaced,
 *   handler: statementHandler((m) => [
 *     db.insertInto('orders').values({ id: m.payload.orderId, total: m.payload.total }),
 *     db.updateTable('customers').set((eb) => ({ orders: eb('orders', '+', 1) })).where('id', '=', m.payload.customerId),
 *   ]),
 * });
 */
export function statementHandler<P, Tx extends StatementTransaction = StatementTransaction>(
  build: StatementBuilder<P>,
): StatementHandler<P, Tx> {
  if (typeof build !== 'function') throw new TypeError('statementHandler needs a function (message) => statements');
  const handler: MessageHandler<P, Tx> = async (message, { tx }) => {
    for (const statement of statementsOf(build(message))) await tx.executeQuery(statement);
  };
  return Object.assign(handler, { [BUILDER]: build });
}

/** The builder of a handler made by `statementHandler`, if it is one. */
export function statementBuilderOf<P>(handler: unknown): StatementBuilder<P> | undefined {
  if (typeof handler !== 'function') return undefined;
  const build = (handler as { [BUILDER]?: unknown })[BUILDER];
  return typeof build === 'function' ? (build as StatementBuilder<P>) : undefined;
}

/** The compiled statements of what a builder returned. */
export function compileStatements(built: EffectStatement | readonly EffectStatement[]): CompiledQuery[] {
  return statementsOf(built).map((s) => (isCompilable(s) ? s.compile() : s));
}

function statementsOf(built: EffectStatement | readonly EffectStatement[]): readonly EffectStatement[] {
  return Array.isArray(built) ? (built as readonly EffectStatement[]) : [built as EffectStatement];
}

function isCompilable(s: EffectStatement): s is Compilable {
  return typeof (s as { compile?: unknown }).compile === 'function';
}
