// A statement handler's delivery, or batch, in one round trip on node-postgres (StatementFastPath): one
// autocommit call of a small temporary PL/pgSQL function that runs the store's claim statement and, for each
// delivery it took, that delivery's statements — prepared once per connection and EXECUTEd with their
// parameters as literals, converted as node-postgres converts bind parameters. A duplicate is one round trip
// with nothing to roll back. The function lives in the session's `pg_temp` (it goes away with the connection)
// and knows nothing of the inbox: the claim comes as SQL text. Anything this path cannot settle answers
// "not applicable", and the store takes the usual path, which meets and reports the same error.

import { createHash } from 'node:crypto';
import { metrics } from '@opentelemetry/api';
import { CompiledQuery, type DatabaseConnection } from 'kysely';
import type { Logger } from '../../consumer-types.js';
import { sqlState, type SqlRow, type SqlStatement, type StatementFastPath } from '../../postgres/sql-seam.js';
import type { Hold, PipelineRunner } from './pipeline-runner.js';
import { literalStatement } from '../../postgres/sql-literal.js';
import { executeArguments, loadPgParameterText, type ParameterText } from './pg-parameters.js';

// A claim statement answering rows of `message_id` and `answer`; each statement runs only when its owner's
// answer starts with `c` (claimed), after every claim.
const ONCE = `CREATE FUNCTION pg_temp.inboxkit_once(p_claim text, p_statements text[], p_owners text[])
RETURNS TABLE (message_id text, answer text) LANGUAGE plpgsql VOLATILE AS $inboxkit$
DECLARE
  v_taken text[] := '{}';
  v_row record;
BEGIN
  FOR v_row IN EXECUTE p_claim LOOP
    message_id := v_row.message_id;
    answer := v_row.answer;
    RETURN NEXT;
    IF v_row.answer LIKE 'c%' THEN
      v_taken := v_taken || v_row.message_id;
    END IF;
  END LOOP;
  FOR v_i IN 1 .. coalesce(array_length(p_statements, 1), 0) LOOP
    IF p_owners[v_i] = ANY (v_taken) THEN
      EXECUTE p_statements[v_i];
    END IF;
  END LOOP;
END
$inboxkit$`;

/** Statements prepared per connection at most (then the usual path), and texts remembered as unpreparable. */
const MAX_PREPARED = 200;
/** Lost session state (DISCARD ALL, a pooler swapping sessions) this often: the path is turned off. */
const MAX_LOST_SESSIONS = 3;

/** What one connection has: the functions, and the statements prepared on it. */
interface SessionState {
  functions: boolean;
  /** Statement text → the name it is prepared under. */
  readonly prepared: Map<string, string>;
}

export class StatementOnce implements StatementFastPath {
  readonly #hold: Hold;
  readonly #runner: () => Promise<PipelineRunner | undefined>;
  readonly #logger: Logger;
  readonly #sessions = new WeakMap<DatabaseConnection, SessionState>();
  readonly #unpreparable = new Set<string>();
  #toText: ParameterText | undefined | null = null;
  #lostSessions = 0;
  #off = false;

  constructor(hold: Hold, runner: () => Promise<PipelineRunner | undefined>, logger: Logger) {
    this.#hold = hold;
    this.#runner = runner;
    this.#logger = logger;
  }

  async run(claim: SqlStatement, owned: readonly { readonly owner: string; readonly statement: SqlStatement }[]): Promise<SqlRow[] | undefined> {
    const statements = owned.map((s) => s.statement);
    if (this.#off || statements.length === 0 || statements.some((s) => this.#unpreparable.has(s.sql))) return undefined;
    const runner = await this.#runner();
    if (runner === undefined) return undefined;
    const toText = (this.#toText ??= (await loadPgParameterText()) ?? undefined);
    if (toText === undefined) return undefined;
    const text = literalStatement(claim);
    return this.#hold(async (connection) => {
      for (let retried = false; ; retried = true) {
        const executes = await this.#setUp(connection, runner, statements, toText);
        if (executes === undefined) return undefined;
        try {
          const call = { sql: 'SELECT message_id, answer FROM pg_temp.inboxkit_once($1::text, $2::text[], $3::text[])', parameters: [text, executes, owned.map((s) => s.owner)] };
          return (await connection.executeQuery(CompiledQuery.raw(literalStatement(call)))).rows as SqlRow[];
        } catch (error) {
          const state = sqlState(error);
          if (state === undefined || state === '55P03' || state === '40001' || state === '40P01') throw error;
          if ((state !== '26000' && state !== '42883') || retried) return undefined; // the usual path reports it
          // The session lost its prepared statements and functions (DISCARD ALL, a pooler swapping sessions):
          // nothing ran; set them up again and call once more.
          this.#sessions.delete(connection);
          if (++this.#lostSessions >= MAX_LOST_SESSIONS) {
            this.#turnOff('session-state-lost', error);
            return undefined;
          }
        }
      }
    });
  }

  /** The functions and `statements` prepared on the connection: their EXECUTEs, or `undefined` (not here). */
  async #setUp(
    connection: DatabaseConnection,
    runner: PipelineRunner,
    statements: readonly SqlStatement[],
    toText: ParameterText,
  ): Promise<string[] | undefined> {
    let session = this.#sessions.get(connection);
    if (session === undefined) this.#sessions.set(connection, (session = { functions: false, prepared: new Map() }));
    if (!session.functions && !(await this.#createFunctions(connection))) return undefined;
    session.functions = true;
    const executes: string[] = [];
    for (const statement of statements) {
      const name = await this.#prepared(connection, runner, session, statement.sql);
      const args = name === undefined ? undefined : executeArguments(statement.parameters, toText);
      if (args === undefined) return undefined;
      executes.push(args.length === 0 ? `EXECUTE ${name}` : `EXECUTE ${name} (${args.join(', ')})`);
    }
    return executes;
  }

  /** Creates the function on the connection (no transaction open); false when Postgres refuses it. */
  async #createFunctions(connection: DatabaseConnection): Promise<boolean> {
    try {
      await connection.executeQuery(CompiledQuery.raw(ONCE));
    } catch (error) {
      const state = sqlState(error);
      if (state === undefined) throw error;
      if (state !== '42723') {
        // No TEMPORARY privilege on the database, no PL/pgSQL …: off for good.
        this.#turnOff('temporary-functions-refused', error);
        return false;
      }
    }
    return true;
  }

  /** The name `sql` is prepared under on this connection, preparing it first; `undefined`: it cannot be. */
  async #prepared(connection: DatabaseConnection, runner: PipelineRunner, session: SessionState, sql: string): Promise<string | undefined> {
    let name = session.prepared.get(sql);
    if (name !== undefined) return name;
    // A bounded number per connection: SQL built anew per message would otherwise fill the backend.
    if (session.prepared.size >= MAX_PREPARED) return undefined;
    name = `inboxkit_fx_${createHash('sha256').update(sql).digest('hex').slice(0, 16)}`;
    try {
      // The extended protocol: a text of several statements is refused, never half prepared, half run.
      await runner(connection, `PREPARE ${name} AS ${sql}`, true);
    } catch (error) {
      if (sqlState(error) === undefined) throw error;
      if (sqlState(error) !== '42P05') {
        // Postgres will not prepare it alone (a parameter type it cannot infer, several statements …).
        if (this.#unpreparable.size >= MAX_PREPARED) this.#unpreparable.clear();
        this.#unpreparable.add(sql);
        return undefined;
      }
    }
    session.prepared.set(sql, name);
    return name;
  }

  #turnOff(reason: string, error: unknown): void {
    if (this.#off) return;
    this.#off = true;
    this.#logger.warn(
      { err: error, reason },
      'inboxkit: statement handlers no longer take their one-round-trip path on this store; their statements run on the handler transaction',
    );
    metrics
      .getMeterProvider()
      .getMeter('@inboxkit/core')
      .createCounter('inboxkit.store.fast_path_off', { description: 'Store fast paths turned off at run time, by reason' })
      .add(1, { reason });
  }
}
