// The store holds a pool connection through the user's handler. node-postgres reports a backend that dies
// meanwhile (pg_terminate_backend, a Postgres restart: 57P01, then the end of the socket) as an 'error' event
// on the pg.Client; pg-pool removes its own idle listener from a client it hands out, so a checked-out client
// has no listener unless its holder adds one — and Node exits on an unhandled 'error' event.
//
// Kysely keeps the pg.Client private (its PostgresConnection exposes only executeQuery), so the store cannot
// add that listener to the client itself. It guards the client's wire instead: pg.Client#query hands a
// Submittable the client's protocol `Connection` (the EventEmitter whose 'errorMessage', 'error' and 'end'
// events the client turns into its own 'error'). While the store holds the connection, the guard catches what
// an unheard client 'error' throws out of those events, and remembers it. By then the client has marked itself
// not queryable and failed its pending queries, so every later statement fails, the store answers
// store-unavailable, and pg-pool discards the client when Kysely releases it (a released client that is not
// queryable is removed and ended, never reused). The guard is taken off when the store lets the connection go.
//
// One side effect: when the client's 'end' handler throws, the client skips emitting its own 'end' event; pg-pool
// listens to it only to clear a maxLifetimeSeconds timer, which finds the client already removed.
//
// Finding the wire costs no round trip: the Submittable answers its submit() with an error, which pg settles
// on the next tick without writing anything. It is looked up once per pooled client.

import { CompiledQuery, type DatabaseConnection } from 'kysely';

/** The slice of pg's protocol `Connection` the guard touches. */
interface Wire {
  emit: (this: Wire, event: string | symbol, ...args: unknown[]) => boolean;
}

/** Events through which a dead backend reaches pg.Client#emit('error'). */
const DEADLY = new Set<string | symbol>(['error', 'errorMessage', 'end']);

const wires = new WeakMap<DatabaseConnection, Wire>();

/** A guard over one held connection: `broken` is the error the client could not report, once it happened. */
export class ConnectionGuard {
  #wire: Wire | undefined;
  #emit: Wire['emit'] | undefined;
  #ownEmit = false;
  #broken: unknown;
  #isBroken = false;
  #inTransaction = false;
  #left = false;

  /** True once the backend went away while the store held the connection. */
  get broken(): boolean {
    return this.#isBroken;
  }

  /**
   * From `true` (the store sent BEGIN) until `false` (it ends the transaction): watch the connection's
   * transaction status, which Postgres reports with every ReadyForQuery — at no cost.
   */
  set inTransaction(on: boolean) {
    this.#inTransaction = on;
    if (on) this.#left = false;
  }

  /** True when, while `inTransaction`, Postgres reported the connection idle: something ended the transaction. */
  get left(): boolean {
    return this.#left;
  }

  /** The error node-postgres would have thrown as an unhandled 'error' event. */
  get error(): unknown {
    return this.#broken;
  }

  /** Starts guarding `connection` (a Kysely PostgresConnection over node-postgres). */
  async hold(connection: DatabaseConnection): Promise<void> {
    const wire = wires.get(connection) ?? (await wireOf(connection));
    if (wire !== undefined) this.#guard(wire);
  }

  #guard(wire: Wire): void {
    this.#wire = wire;
    this.#ownEmit = Object.prototype.hasOwnProperty.call(wire, 'emit');
    const emit = wire.emit;
    this.#emit = emit;
    wire.emit = (event, ...args) => {
      if (event === 'readyForQuery' && this.#inTransaction && (args[0] as { status?: unknown } | undefined)?.status === 'I') this.#left = true;
      try {
        return emit.call(wire, event, ...args);
      } catch (error) {
        // Only what an unheard pg.Client 'error' throws while its wire reports a dead backend.
        if (!DEADLY.has(event)) throw error;
        if (!this.#isBroken) {
          this.#isBroken = true;
          this.#broken = error;
        }
        return true;
      }
    };
  }

  /** Stops guarding: from here on the pool's idle listener (or the next holder) hears the client. */
  release(): void {
    const wire = this.#wire;
    if (wire === undefined) return;
    this.#wire = undefined;
    if (this.#ownEmit) wire.emit = this.#emit!;
    else delete (wire as { emit?: unknown }).emit;
  }
}

/** pg's protocol Connection under a Kysely connection, or undefined when it is not node-postgres. */
async function wireOf(connection: DatabaseConnection): Promise<Wire | undefined> {
  // Only Kysely's PostgresDialect connection hands `sql` to pg.Client#query untouched; other drivers (PGlite …)
  // are never given the probe, which they could not make sense of.
  if ((connection as { constructor?: { name?: string } }).constructor?.name !== 'PostgresConnection') return undefined;
  let found: Wire | undefined;
  let settle: () => void = () => {};
  const settled = new Promise<void>((resolve) => (settle = resolve));
  const probe = {
    submit(wire: Wire): Error {
      found = wire;
      // An error from submit() ends the query on the next tick, before anything is written to the socket.
      return new Error('inboxkit: connection lookup (nothing is sent)');
    },
    handleError(): void {
      settle();
    },
    handleReadyForQuery(): void {
      settle();
    },
    then(onFulfilled: (v: unknown) => unknown, onRejected: (e: unknown) => unknown): Promise<unknown> {
      return settled.then(() => ({ command: 'SELECT', rowCount: 0, rows: [] })).then(onFulfilled, onRejected);
    },
    toString: () => '/* inboxkit: connection lookup, nothing sent */',
  };
  try {
    await connection.executeQuery({ ...CompiledQuery.raw(''), sql: probe as unknown as string });
  } catch {
    return undefined; // not node-postgres, or the client is already unusable: nothing to guard
  }
  const wire = found !== undefined && typeof found.emit === 'function' ? found : undefined;
  // A client that was not queryable settles without submit(): ask again next time rather than remember "none".
  if (wire !== undefined) wires.set(connection, wire);
  return wire;
}
