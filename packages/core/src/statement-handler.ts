// A handler whose whole effect is SQL statements built from the message alone. Because nothing has to run
// between the claim and the effect, the Postgres store can send BEGIN, the claim, the statements and COMMIT in
// one round trip — the delivery then costs what a plain autocommit INSERT costs in round trips, with the
// exactly-once record included. Everywhere else (another store, a batch, a retry or a replay) the statements
// simply run in order on `context.tx`, like any handler's.

import type { Compilable, CompiledQuery } from 'kysely';
import type { MessageHandler } from './consumer-types.js';
import type { DecodedMessage } from './message.js';

/** What a statement handler builds: a Kysely query builder (anything with `compile()`) or a compiled query. */
export type EffectStatement = Compilable | CompiledQuery;

/** The builder of a statement handler: pure — it may run for duplicates too, and only builds queries. */
export type StatementBuilder<P> = (message: DecodedMessage<P>) => EffectStatement | readonly EffectStatement[];

/** The transaction a statement handler runs its statements on when they do not go in one round trip. */
export interface StatementTransaction {
  executeQuery(query: CompiledQuery | Compilable): Promise<unknown>;
}

const BUILDER = Symbol.for('inboxkit.statementBuilder');

/** A statement handler: a `MessageHandler` that also carries its builder for the store's one-round-trip path. */
export type StatementHandler<P, Tx extends StatementTransaction> = MessageHandler<P, Tx> & {
  readonly [BUILDER]: StatementBuilder<P>;
};

/**
 * Makes a handler out of SQL statements known from the message alone, for effects such as "insert the order",
 * "add to the balance", "upsert the projection row". The contract:
 *
 * - `build` only builds queries (Kysely builders or `CompiledQuery`s) from the decoded message. It must not
 *   touch anything else: it runs before inboxkit knows whether the delivery is a duplicate, and its statements
 *   run only if the delivery is claimed. It may run more than once per delivery.
 * - The statements run in order in the claim's transaction and commit with the inbox record, or not at all —
 *   exactly like a handler doing `await tx.executeQuery(…)` for each.
 * - With `PostgresInboxStore` on node-postgres, a new id's BEGIN, claim, statements and COMMIT go to Postgres
 *   in one round trip: each statement is prepared once per connection and executed with its parameters as
 *   literals. A delivery that is not a plain new id (a duplicate answered by that round trip aside), a
 *   statement Postgres cannot prepare on its own, or a binary parameter take the usual path (three round
 *   trips). So does every batch (`handleBatch`) and every store but the Postgres one.
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
