// The inbox on Postgres through a caller-owned Kysely instance (node-postgres, or PGlite for embedded use).
// The store never creates or destroys the client: it borrows connections from the application's pool.

import { AsyncResource } from 'node:async_hooks';
import { createHash, randomUUID } from 'node:crypto';
import type { Kysely, QueryExecutor, Transaction } from 'kysely';
import { isInboxkitError, StoreUnavailableError } from '../errors.js';
import type { ErrorInfo } from '../outcome.js';
import type {
  BatchRun,
  BusyReason,
  ClaimedDelivery,
  ClaimedFrom,
  ClaimEffect,
  ClaimRequest,
  ClaimSettings,
  FailureRecord,
  FailureWrite,
  InboxRow,
  InboxRowState,
  InboxStatus,
  InboxStore,
  InspectionFilter,
  LeaseClaim,
  LeaseRun,
  ProcessingRow,
  PruneOptions,
  PruneResult,
  ReasonCount,
  ReplayAuditEntry,
  ReplayAuditRow,
  StatusCount,
  TransactionalRun,
} from '../store.js';
import { InboxStatements, type ClaimRow, type OnceBatchFunction, type OnceFunction, type PreparedNewClaim } from './inbox-statements.js';
import { resolveInboxTableNames, type InboxTableNames, type InboxTableOptions } from './inbox-table-names.js';
import { HandlerTransaction } from './handler-transaction.js';
import { loadPgParameterText, loadPgPipelineRunner, type ParameterText, type PipelineRunner, type Rows } from './pipelined-query.js';
import { executeArguments } from './sql-literal.js';
import { holding, LazySession, type SqlSession, sqlState } from './sql-session.js';

/** Options of `PostgresInboxStore`. */
export interface PostgresInboxStoreOptions<DB> extends InboxTableOptions {
  /** The application's Kysely instance (PostgresDialect over a pg Pool, or a PGlite dialect). Never destroyed here. */
  readonly db: Kysely<DB>;
  /**
   * `auto`: on node-postgres, send BEGIN, the claim and its state read in one round trip (detected once, with
   * a fallback for other drivers). `off`: one statement per round trip. Default is `auto`.
   */
  readonly pipelining?: 'auto' | 'off';
  /**
   * Prepare the single-message claim once per connection (`PREPARE` / `EXECUTE`) instead of parsing and planning
   * it for every message; used with pipelining. Turn off behind a pooler that cannot keep session state
   * (PgBouncer in transaction mode); the store also turns it off by itself after repeated "prepared statement
   * does not exist" errors. Default is true.
   */
  readonly preparedStatements?: boolean;
  /**
   * How `handleBatch` isolates messages. `on-failure`: the batch first runs without savepoints (one round trip
   * per handler statement, nothing more); if a handler fails, that transaction is rolled back and the batch runs
   * again with a savepoint per message, so the failure is recorded and the others commit. Handlers of a failing
   * batch may therefore run twice (their transaction effects once). `always`: a savepoint before every message.
   * Default is `on-failure`.
   */
  readonly batchSavepoints?: 'on-failure' | 'always';
  /**
   * For statement handlers (`statementHandler`): create, once per connection, two temporary PL/pgSQL functions
   * (in the session's `pg_temp` schema; they go away with the connection) that claim one delivery, or a batch,
   * and run the statements of what they took in one autocommit statement — one round trip for a first delivery
   * or a batch instead of two, and for a duplicate one round trip with no ROLLBACK owed. Needs pipelining and prepared statements. Turn off where
   * sessions may not create temporary objects; the store also turns it off by itself when Postgres refuses
   * the function (no TEMPORARY privilege on the database, no PL/pgSQL). Default is true.
   *
   * @example
   * const store = new PostgresInboxStore({ db, temporaryFunctions: false }); // two round trips, no temp objects
   */
  readonly temporaryFunctions?: boolean;
}

const DEFAULT_LIMIT = 100;

/**
 * The claim statement after BEGIN: `full` for `InboxStatements.claim` (and the prepared take-over claim),
 * `lean-one` for the single-delivery claim of `InboxStatements.preparedNewClaim`, `lean-batch` for
 * `InboxStatements.leanClaim`.
 */
interface ClaimPlan {
  readonly statement: string;
  readonly kind: 'full' | 'lean-one' | 'lean-batch';
}

/** Effect statements prepared per connection at most (then the usual path), and SQL texts remembered as unpreparable. */
const MAX_PREPARED_EFFECTS = 200;

/** A delivery waiting for a session: its work, and where its result goes. */
interface Borrower<T> {
  readonly fn: (session: SqlSession) => Promise<T>;
  readonly resolve: (value: T) => void;
  readonly reject: (error: unknown) => void;
}

/** What a claim answered about one id. */
type ClaimAnswer =
  /** Taken; `state` is set when the claim dead-lettered it (attempts beyond `maxAttempts`) instead. */
  | { readonly claimed: ClaimedDelivery; readonly state: InboxRowState | undefined }
  | { readonly claimed: false; readonly state: InboxRowState }
  /** A plain duplicate (the row is completed, with this payload): the lean claims answer no state for it. */
  | { readonly claimed: false; readonly state: undefined; readonly duplicate: true };

/** `not-claimed` with the row, or `duplicate` for a plain duplicate answered without it. */
function unclaimed(answer: ClaimAnswer | undefined): { readonly kind: 'duplicate' } | { readonly kind: 'not-claimed'; readonly row: InboxRowState | undefined } {
  return answer !== undefined && 'duplicate' in answer ? { kind: 'duplicate' } : { kind: 'not-claimed', row: answer?.state };
}

const DUPLICATE: ClaimAnswer = { claimed: false, state: undefined, duplicate: true };
const DEFAULT_PRUNE_BATCH = 5_000;

/** A batch message's work on the batch's transaction (the idempotent consumer's handler run). */
type BatchWork<DB> = (tx: Transaction<DB>, claimed: ClaimedDelivery, index: number) => Promise<void>;

/** How a batch message's failure is recorded. */
type BatchFailure = (claimed: ClaimedDelivery, error: unknown, index: number) => FailureRecord;

/**
 * The Postgres inbox. Tables come from `migrateInbox(db)` / `inboxMigrations()` or `migrations/0001_inbox.sql`
 * (default `inboxkit.inbox` and `inboxkit.inbox_replays`). Handlers get a Kysely `Transaction<DB>` that commits
 * with the inbox row.
 *
 * @example
 * const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString }) }) });
 * await migrateInbox(db);
 * const store = new PostgresInboxStore({ db });
 */
export class PostgresInboxStore<DB = unknown> implements InboxStore<Transaction<DB>> {
  readonly kind = 'postgres';
  /** The validated table names. */
  readonly names: InboxTableNames;
  /**
   * The advisory lock key of `prune` (one runner at a time). `SELECT pg_advisory_lock(key)` from a session
   * pauses pruning until it unlocks.
   */
  readonly pruneLockKey: bigint;
  readonly #db: Kysely<DB>;
  readonly #raw: QueryExecutor;
  readonly #sql: InboxStatements;
  readonly #pipelining: 'auto' | 'off';
  readonly #pruneKey: bigint;
  /** The lean claim of one delivery (node-postgres, prepared per connection). */
  readonly #newClaims: { readonly completed: PreparedNewClaim; readonly processing: PreparedNewClaim };
  /** The full claim of one delivery, prepared, for an id that probably has a row (`ClaimRequest.expectsRow`). */
  readonly #takeOverClaims: { readonly completed: PreparedNewClaim; readonly processing: PreparedNewClaim };
  /** Statements prepared on each connection (Kysely keeps one connection object per pg client). */
  readonly #preparedOn = new WeakMap<object, Set<string>>();
  /** Effect statements (by SQL text) Postgres would not prepare on their own: they take the usual path. */
  readonly #unpreparable = new Set<string>();
  /** node-postgres' parameter conversion, once loaded (`null`: not loaded yet; `undefined`: not available). */
  #parameterText: ParameterText | undefined | null = null;
  /** Prepared-statement names of statement handlers' SQL texts. */
  readonly #effectNames = new Map<string, string>();
  #usePrepared: boolean;
  /**
   * The claim-and-statements functions (`InboxStatements.onceFunction`, `onceBatchFunction`), created together
   * and known by the single one's name per connection; `undefined` once turned off.
   */
  #once: { readonly one: OnceFunction; readonly batch: OnceBatchFunction } | undefined;
  readonly #batchSavepoints: 'on-failure' | 'always';
  #missingPrepared = 0;
  #runner: Promise<PipelineRunner | undefined> | undefined;
  /** The probe's answer once known (`null` before). */
  #knownRunner: PipelineRunner | undefined | null = null;
  /** Connections parked by a duplicate's deferred ROLLBACK, each waiting for its next borrower (#claimSession). */
  readonly #parked: ((borrower: Borrower<unknown> | undefined) => void)[] = [];

  constructor(options: PostgresInboxStoreOptions<DB>) {
    if (typeof options?.db?.getExecutor !== 'function') {
      throw new StoreUnavailableError('PostgresInboxStore needs { db }: a Kysely instance over node-postgres or PGlite');
    }
    this.names = resolveInboxTableNames(options);
    this.#db = options.db;
    // The store's own statements must not meet the application's plugins (CamelCasePlugin would rename columns).
    this.#raw = options.db.withoutPlugins().getExecutor();
    this.#sql = new InboxStatements(this.names);
    this.#pipelining = options.pipelining ?? 'auto';
    this.#usePrepared = options.preparedStatements ?? true;
    this.#batchSavepoints = options.batchSavepoints ?? 'on-failure';
    this.#once =
      options.temporaryFunctions === false ? undefined : { one: this.#sql.onceFunction(), batch: this.#sql.onceBatchFunction() };
    this.#newClaims = { completed: this.#sql.preparedNewClaim('completed'), processing: this.#sql.preparedNewClaim('processing') };
    this.#takeOverClaims = {
      completed: this.#sql.preparedTakeOverClaim('completed'),
      processing: this.#sql.preparedTakeOverClaim('processing'),
    };
    const digest = createHash('sha256').update(`inboxkit:prune:${this.names.qualifiedTable}`).digest();
    this.#pruneKey = digest.readBigInt64BE(0);
    this.pruneLockKey = this.#pruneKey;
  }

  // ── message path ────────────────────────────────────────────────────────────────────────────────────────

  async runTransactional<T>(
    settings: ClaimSettings,
    request: ClaimRequest,
    work: (tx: Transaction<DB>, claimed: ClaimedDelivery) => Promise<T>,
    effect?: ClaimEffect,
  ): Promise<TransactionalRun<T>> {
    return this.#claimSession(async (s) => {
      if (effect !== undefined) {
        const once = await this.#runOnce(s, settings, request, effect);
        if (once !== undefined) return once as TransactionalRun<T>;
      }
      const answers = await this.#claim(s, settings, [{ ...request, leaseToken: null }], 'completed');
      if (!(answers instanceof Map)) return answers;
      const answer = answers.get(request.messageId);
      if (answer === undefined || !answer.claimed) {
        // A duplicate: its transaction wrote nothing. Its ROLLBACK rides with the next claim (see #claimSession),
        // or goes out alone without a wait for its answer.
        if (!s.deferRollback()) await s.rollbackUnawaited();
        return unclaimed(answer);
      }
      if (answer.state !== undefined) {
        if (!(await s.commit())) return { kind: 'busy', reason: 'contended' };
        return { kind: 'exhausted', row: answer.state };
      }
      const claimed = answer.claimed;
      const effectPlan = effect === undefined ? undefined : this.#effectPlan(s, effect);
      let run: TransactionalRun<T>;
      if (effectPlan?.executes !== undefined) {
        const error = await this.#commitWith(s, effectPlan.executes);
        run = error === undefined ? { kind: 'completed', claimed, value: undefined as T } : { kind: 'failed', claimed, error };
      } else {
        run = await this.#runWork(s, claimed, work);
        // Statements not yet prepared on this connection ran through `work`; prepared now, for the next delivery.
        if (effectPlan?.prepare !== undefined && !s.broken) await this.#prepareEffects(s, effectPlan.prepare);
      }
      if (effect !== undefined && !s.broken && !s.inTransaction) await this.#createOnce(s);
      return run;
    });
  }

  /**
   * A statement handler's delivery in one round trip, through the claim-and-statements function
   * (`InboxStatements.onceFunction`), when it exists on this connection and every statement is prepared here.
   * `undefined` sends the delivery down the usual path: no function or statements here yet, a row the lean
   * insert found that this delivery may take over (a retry due, a replay), an id neither taken nor seen (beyond
   * `maxAttempts`, or committed after the read), and the errors `#onceFailure` sends there. Nothing was written
   * in any of these cases.
   */
  async #runOnce(
    s: SqlSession,
    settings: ClaimSettings,
    request: ClaimRequest,
    effect: ClaimEffect,
  ): Promise<TransactionalRun<undefined> | undefined> {
    const once = this.#once?.one;
    if (once === undefined || s.inTransaction) return undefined;
    if (this.#preparedOn.get(s.connection)?.has(once.name) !== true) return undefined;
    const plan = this.#effectPlan(s, effect);
    if (plan?.executes === undefined) return undefined;
    let rows: Rows;
    try {
      rows = await s.query(once.call(settings, request, plan.executes));
    } catch (error) {
      const failure = this.#onceFailure(s, error);
      if (typeof failure === 'object') return failure;
      // A statement's error after a take-over goes down the usual path too: its attempt number went with the
      // rolled-back claim, and the usual path records it with the right one.
      if (failure === 'usual' || request.expectsRow === true) return undefined;
      // A statement failed after the lean insert: the claim went with it; the failure is recorded as after any
      // failed attempt, with the attempt the insert wrote.
      const claimed = { messageId: request.messageId, attempt: Math.max(1, request.deliveryCount), from: 'new', leaseToken: null } as const;
      return { kind: 'failed', claimed, error };
    }
    const answer = rows[0]?.['answer'];
    if (typeof answer !== 'string') return undefined;
    if (answer.startsWith('a')) {
      const space = answer.indexOf(' ');
      const attempt = Number(answer.slice(1, space));
      const from = answer.slice(space + 1) as ClaimedFrom;
      return { kind: 'completed', claimed: { messageId: request.messageId, attempt, from, leaseToken: null }, value: undefined };
    }
    if (answer === 'd') return { kind: 'duplicate' };
    const state = toRowState(parseJson(answer.slice(1)));
    if (claimableBy(state, request)) return undefined;
    return { kind: 'not-claimed', row: state };
  }

  /**
   * What an error of a claim-and-statements function's call means: `busy` (the lock timeout, a conflict),
   * `statement` (one of the handler's statements failed: nothing was committed), or `usual` (the usual path
   * meets the error again and reports it as it always does — lost session state, which is then set up again, or
   * any error but a statement's). Throws when it is not Postgres' answer but the connection's failure. (A
   * statement's error is told by its context line, `… at EXECUTE`, which is in the server's `lc_messages`
   * language: in another than English every failure takes the usual path.)
   */
  #onceFailure(s: SqlSession, error: unknown): { readonly kind: 'busy'; readonly reason: BusyReason } | 'statement' | 'usual' {
    const state = sqlState(error);
    if (state === undefined) throw error;
    s.assertAlive();
    const busy = busyReason(error);
    if (busy !== undefined) return { kind: 'busy', reason: busy };
    if (state === '26000' || state === '42883') {
      // The session lost its prepared statements or temporary objects (DISCARD ALL, a pooler).
      this.#preparedOn.delete(s.connection);
      return 'usual';
    }
    const where = (error as { where?: unknown }).where;
    return typeof where === 'string' && /\bat EXECUTE\b/.test(where) ? 'statement' : 'usual';
  }

  /** Creates the claim-and-statements functions on the session's connection (no transaction open), once. */
  async #createOnce(s: SqlSession): Promise<void> {
    const once = this.#once;
    if (once === undefined || !s.pipelined || !this.#usePrepared) return; // #runOnce would never call them
    let known = this.#preparedOn.get(s.connection);
    if (known?.has(once.one.name) === true) return;
    if (known === undefined) {
      known = new Set();
      this.#preparedOn.set(s.connection, known);
    }
    for (const [statement, exists] of [
      [once.one.create, '42723'],
      [once.one.prepare, '42P05'],
      [once.batch.create, '42723'],
      [once.batch.prepare, '42P05'],
    ] as const) {
      try {
        await s.query(statement);
      } catch (error) {
        if (sqlState(error) === undefined) throw error;
        // Already there (this session's knowledge was reset), or Postgres refuses it here: off for good.
        if (sqlState(error) !== exists) {
          this.#once = undefined;
          return;
        }
      }
    }
    known.add(once.one.name);
  }

  /** `work` on the handler's transaction over the session's connection, then COMMIT (or ROLLBACK). */
  async #runWork<T>(
    s: SqlSession,
    claimed: ClaimedDelivery,
    work: (tx: Transaction<DB>, claimed: ClaimedDelivery) => Promise<T>,
  ): Promise<TransactionalRun<T>> {
    const handlerTx = new HandlerTransaction<DB>(this.#db.getExecutor(), async () => s.connection);
    let value: T;
    try {
      value = await work(handlerTx.tx, claimed);
    } catch (error) {
      handlerTx.close();
      s.assertAlive();
      await s.rollbackQuietly();
      // A handler whose own statement met the dying backend: the end of the socket may only come now.
      s.assertAlive();
      return { kind: 'failed', claimed, error };
    }
    handlerTx.close();
    s.assertAlive();
    if (!(await s.commit())) return { kind: 'failed', claimed, error: abortedTransactionError() };
    return { kind: 'completed', claimed, value };
  }

  async runTransactionalBatch(
    settings: ClaimSettings,
    requests: readonly ClaimRequest[],
    work: BatchWork<DB>,
    onFailure: BatchFailure,
    effects?: readonly (ClaimEffect | undefined)[],
  ): Promise<BatchRun[]> {
    if (requests.length === 0) return [];
    return this.#session(async (s) => {
      if (effects !== undefined && this.#batchSavepoints === 'on-failure') {
        const once = await this.#runBatchOnce(s, settings, requests, work, onFailure, effects);
        if (once !== undefined) return once;
      }
      const runs = await this.#runBatchUsual(s, settings, requests, work, onFailure, effects);
      if (effects !== undefined && !s.broken && !s.inTransaction) await this.#createOnce(s);
      return runs;
    });
  }

  /** A batch in one transaction: the optimistic pass first (`batchSavepoints: 'on-failure'`), then isolated. */
  async #runBatchUsual(
    s: SqlSession,
    settings: ClaimSettings,
    requests: readonly ClaimRequest[],
    work: BatchWork<DB>,
    onFailure: BatchFailure,
    effects?: readonly (ClaimEffect | undefined)[],
  ): Promise<BatchRun[]> {
    if (this.#batchSavepoints === 'on-failure') {
      const optimistic = await this.#runBatch(s, settings, requests, work, onFailure, false, effects);
      if (optimistic !== 'rerun') return optimistic;
    }
    return this.#runBatchIsolated(s, settings, requests, work, onFailure);
  }

  /** The savepoint pass of a batch; every result `busy` when even that lost a race. */
  async #runBatchIsolated(
    s: SqlSession,
    settings: ClaimSettings,
    requests: readonly ClaimRequest[],
    work: BatchWork<DB>,
    onFailure: BatchFailure,
  ): Promise<BatchRun[]> {
    const isolated = await this.#runBatch(s, settings, requests, work, onFailure, true);
    return isolated === 'rerun' ? requests.map(() => ({ kind: 'busy', reason: 'contended' }) as const) : isolated;
  }

  /**
   * A batch of statement handlers in one round trip, through the batch claim-and-statements function
   * (`InboxStatements.onceBatchFunction`), when it exists on this connection, no id is expected to have a row,
   * and every message's statements are prepared here; `undefined` otherwise (the usual path, nothing written).
   * Ids it answers with a row this batch may take over (a retry due, a replay), or not at all (beyond
   * `maxAttempts`, committed after the read), then run the usual way as a batch of their own. When a statement
   * fails, nothing was committed and the batch runs with a savepoint per message, which isolates the failure.
   */
  async #runBatchOnce(
    s: SqlSession,
    settings: ClaimSettings,
    requests: readonly ClaimRequest[],
    work: BatchWork<DB>,
    onFailure: BatchFailure,
    effects: readonly (ClaimEffect | undefined)[],
  ): Promise<BatchRun[] | undefined> {
    const once = this.#once;
    if (once === undefined || s.inTransaction || requests.some((r) => r.expectsRow === true)) return undefined;
    if (this.#preparedOn.get(s.connection)?.has(once.one.name) !== true) return undefined;
    const statements: string[] = [];
    const owners: string[] = [];
    for (let i = 0; i < requests.length; i++) {
      const effect = effects[i];
      const plan = effect === undefined ? undefined : this.#effectPlan(s, effect);
      if (plan?.executes === undefined) return undefined;
      for (const execute of plan.executes) {
        statements.push(execute);
        owners.push(requests[i]!.messageId);
      }
    }
    let rows: Rows;
    try {
      rows = await s.query(once.batch.call(settings, requests, statements, owners));
    } catch (error) {
      const failure = this.#onceFailure(s, error);
      if (typeof failure === 'object') return requests.map(() => failure);
      if (failure === 'usual') return undefined;
      return this.#runBatchIsolated(s, settings, requests, work, onFailure);
    }
    const answers = new Map<string, string>();
    for (const row of rows) answers.set(String(row['message_id']), String(row['answer']));
    const runs: (BatchRun | undefined)[] = [];
    const rest: number[] = [];
    for (let i = 0; i < requests.length; i++) {
      const request = requests[i]!;
      const answer = answers.get(request.messageId);
      if (answer?.startsWith('a') === true) {
        const claimed = { messageId: request.messageId, attempt: Number(answer.slice(1)), from: 'new', leaseToken: null } as const;
        runs.push({ kind: 'completed', claimed });
      } else if (answer === 'd') {
        runs.push({ kind: 'duplicate' });
      } else {
        const state = answer === undefined ? undefined : toRowState(parseJson(answer.slice(1)));
        if (state !== undefined && !claimableBy(state, request)) runs.push({ kind: 'not-claimed', row: state });
        else {
          runs.push(undefined);
          rest.push(i);
        }
      }
    }
    if (rest.length > 0) {
      const again = await this.#runBatchUsual(
        s,
        settings,
        rest.map((i) => requests[i]!),
        (tx, claimed, k) => work(tx, claimed, rest[k]!),
        (claimed, error, k) => onFailure(claimed, error, rest[k]!),
        rest.map((i) => effects[i]),
      );
      again.forEach((run, k) => (runs[rest[k]!] = run));
    }
    return runs as BatchRun[];
  }

  /**
   * One pass of a batch. Without savepoints (the optimistic pass), any handler failure rolls the whole
   * transaction back and answers `rerun`; with a savepoint per message, a failure rolls back only that message,
   * whose failure is then recorded in the same transaction. In the optimistic pass, when every claimed message
   * has a statement handler whose statements are prepared on this connection (`effects`), all of them and the
   * COMMIT go in one round trip: two round trips for the batch however many messages it holds.
   */
  async #runBatch(
    s: SqlSession,
    settings: ClaimSettings,
    requests: readonly ClaimRequest[],
    work: BatchWork<DB>,
    onFailure: BatchFailure,
    savepoints: boolean,
    effects?: readonly (ClaimEffect | undefined)[],
  ): Promise<BatchRun[] | 'rerun'> {
    const ids = requests.map((r) => r.messageId);
    const answers = await this.#claim(s, settings, requests.map((r) => ({ ...r, leaseToken: null })), 'completed');
    if (!(answers instanceof Map)) return requests.map(() => answers);
    let toPrepare: Map<string, string> | undefined;
    if (!savepoints && effects !== undefined) {
      const batch = this.#batchEffects(s, ids, answers, effects);
      if (batch.executes !== undefined) {
        // A statement failed: nothing committed; the isolated pass finds which, with the handlers.
        return (await this.#commitWith(s, batch.executes)) === undefined ? batch.results : 'rerun';
      }
      toPrepare = batch.prepare;
    }
    const run = await this.#runBatchWork(s, settings, requests, ids, answers, work, onFailure, savepoints);
    if (toPrepare !== undefined && !s.broken) await this.#prepareEffects(s, toPrepare);
    return run;
  }

  /**
   * The batch's statements when every claimed message has a statement handler whose statements are prepared
   * here (`executes`, with the results they will have once committed); otherwise the statements to prepare
   * after this batch, for the next.
   */
  #batchEffects(
    s: SqlSession,
    ids: readonly string[],
    answers: ReadonlyMap<string, ClaimAnswer>,
    effects: readonly (ClaimEffect | undefined)[],
  ): { readonly executes?: string[]; readonly results: BatchRun[]; readonly prepare?: Map<string, string> } {
    const executes: string[] = [];
    const results: BatchRun[] = [];
    let prepare: Map<string, string> | undefined;
    let usable = true;
    for (let i = 0; i < ids.length; i++) {
      const answer = answers.get(ids[i]!);
      if (answer === undefined || !answer.claimed) {
        results.push(unclaimed(answer));
        continue;
      }
      if (answer.state !== undefined) {
        results.push({ kind: 'exhausted', row: answer.state });
        continue;
      }
      results.push({ kind: 'completed', claimed: answer.claimed });
      const effect = effects[i];
      const plan = usable && effect !== undefined ? this.#effectPlan(s, effect) : undefined;
      if (plan?.executes !== undefined) executes.push(...plan.executes);
      else {
        usable = false;
        for (const [name, sql] of plan?.prepare ?? []) (prepare ??= new Map()).set(name, sql);
      }
    }
    return usable && executes.length > 0 ? { executes, results } : { results, ...(prepare === undefined ? {} : { prepare }) };
  }

  /** `#runBatch` through `work`: each handler in turn on the batch's transaction, then COMMIT. */
  async #runBatchWork(
    s: SqlSession,
    settings: ClaimSettings,
    requests: readonly ClaimRequest[],
    ids: readonly string[],
    answers: ReadonlyMap<string, ClaimAnswer>,
    work: BatchWork<DB>,
    onFailure: BatchFailure,
    savepoints: boolean,
  ): Promise<BatchRun[] | 'rerun'> {
    const results: (BatchRun | undefined)[] = new Array<BatchRun | undefined>(requests.length).fill(undefined);
    const failures: { index: number; claimed: ClaimedDelivery; error: unknown; record: FailureRecord }[] = [];
    const handlerTx = new HandlerTransaction<DB>(this.#db.getExecutor(), async () => s.connection);
    try {
      for (let i = 0; i < requests.length; i++) {
        const answer = answers.get(ids[i]!);
        if (answer === undefined || !answer.claimed) {
          results[i] = unclaimed(answer);
          continue;
        }
        if (answer.state !== undefined) {
          results[i] = { kind: 'exhausted', row: answer.state };
          continue;
        }
        const claimed = answer.claimed;
        if (savepoints) {
          try {
            await s.query('SAVEPOINT inboxkit_message');
          } catch (savepointError) {
            // The previous handler resolved but left the transaction aborted (it swallowed a failed statement).
            if (sqlState(savepointError) !== '25P02' || i === 0) throw savepointError;
            await this.#failPrevious(s, i, results, failures, onFailure);
            await s.query('SAVEPOINT inboxkit_message');
          }
        }
        let error: unknown;
        let failed = false;
        try {
          await work(handlerTx.tx, claimed, i);
        } catch (e) {
          failed = true;
          error = e;
        }
        if (failed) s.assertAlive();
        if (failed && !savepoints) {
          await s.rollbackQuietly();
          s.assertAlive();
          return 'rerun';
        }
        if (failed) {
          await s.query('ROLLBACK TO SAVEPOINT inboxkit_message');
          failures.push({ index: i, claimed, error, record: onFailure(claimed, error, i) });
        } else results[i] = { kind: 'completed', claimed };
      }
    } finally {
      handlerTx.close();
    }
    s.assertAlive();
    try {
      if (failures.length > 0) {
        const written = await s.query(this.#sql.batchFailures(settings, failures.map((f) => f.record)));
        const byId = new Map(written.map((r) => [String(r['message_id']), toRow(r)]));
        for (const f of failures) {
          const row = byId.get(f.claimed.messageId);
          results[f.index] = {
            kind: 'failed',
            claimed: f.claimed,
            error: f.error,
            write: row === undefined ? { recorded: false, row: undefined } : { recorded: true, row },
          };
        }
      }
    } catch (error) {
      if (sqlState(error) !== '25P02') throw error;
      await s.rollbackQuietly();
      return 'rerun';
    }
    // The last handler may have left the transaction aborted: then nothing committed.
    if (!(await s.commit())) return 'rerun';
    return results.map((r) => r ?? { kind: 'busy', reason: 'contended' });
  }

  /** Marks the message before `index` failed because its handler left the transaction aborted. */
  async #failPrevious(
    s: SqlSession,
    index: number,
    results: (BatchRun | undefined)[],
    failures: { index: number; claimed: ClaimedDelivery; error: unknown; record: FailureRecord }[],
    onFailure: BatchFailure,
  ): Promise<void> {
    await s.query('ROLLBACK TO SAVEPOINT inboxkit_message');
    for (let k = index - 1; k >= 0; k--) {
      const previous = results[k];
      if (previous?.kind === 'completed') {
        const error = abortedTransactionError();
        failures.push({ index: k, claimed: previous.claimed, error, record: onFailure(previous.claimed, error, k) });
        results[k] = undefined;
        return;
      }
    }
  }

  async claimLease(settings: ClaimSettings & { readonly leaseMs: number }, request: ClaimRequest): Promise<LeaseClaim> {
    return this.#session(async (s) => {
      const answers = await this.#claim(s, settings, [{ ...request, leaseToken: randomUUID() }], 'processing', settings.leaseMs);
      if (!(answers instanceof Map)) return answers;
      if (!(await s.commit())) return { kind: 'busy', reason: 'contended' };
      const answer = answers.get(request.messageId);
      if (answer === undefined || !answer.claimed) return unclaimed(answer);
      if (answer.state !== undefined) return { kind: 'exhausted', row: answer.state };
      return { kind: 'claimed', claimed: answer.claimed };
    });
  }

  async completeLease<T>(
    settings: ClaimSettings,
    claimed: ClaimedDelivery,
    work: (tx: Transaction<DB>) => Promise<T>,
  ): Promise<LeaseRun<T>> {
    if (claimed.leaseToken === null) throw new TypeError('completeLease needs a leased claim');
    const fence = this.#sql.completeLease(settings, claimed.messageId, claimed.leaseToken);
    const lazy = new LazySession(this.#raw, await this.#pipelineRunner());
    const handlerTx = new HandlerTransaction<DB>(this.#db.getExecutor(), async () => (await lazy.begin()).connection);
    try {
      let value: T;
      try {
        value = await work(handlerTx.tx);
      } catch (error) {
        handlerTx.close();
        if (lazy.started) {
          const s = await lazy.begin().catch(() => undefined);
          s?.assertAlive();
          await s?.rollbackQuietly();
          s?.assertAlive();
        }
        return { kind: 'failed', error };
      }
      handlerTx.close();
      if (!lazy.started) {
        const rows = await this.#session((s) => s.query(fence));
        return rows.length > 0 ? { kind: 'completed', value } : { kind: 'lease-lost' };
      }
      try {
        const s = await lazy.begin();
        s.assertAlive();
        const rows = await s.query(fence);
        if (rows.length === 0) {
          await s.rollbackQuietly();
          return { kind: 'lease-lost' };
        }
        if (!(await s.commit())) return { kind: 'failed', error: abortedTransactionError() };
        return { kind: 'completed', value };
      } catch (error) {
        if (sqlState(error) === '25P02') return { kind: 'failed', error: abortedTransactionError() };
        throw unavailable(error);
      }
    } finally {
      await lazy.release().catch(() => undefined);
    }
  }

  async recordFailure(settings: ClaimSettings, failure: FailureRecord): Promise<FailureWrite> {
    return this.#session(async (s) => {
      const { rows, followUp } = await s.withFollowUp(
        [this.#sql.recordFailure(settings, failure)],
        this.#sql.rows(settings.consumer, [failure.messageId]),
      );
      const written = rows[0]?.[0];
      if (written !== undefined) return { recorded: true, row: toRow(written) };
      const current = followUp?.[0];
      return { recorded: false, row: current === undefined ? undefined : toRow(current) };
    });
  }

  async recordAttemptsStarted(settings: ClaimSettings, messageIds: readonly string[]): Promise<void> {
    if (messageIds.length === 0) return;
    await this.#session((s) => s.query(this.#sql.recordAttemptsStarted(settings, messageIds)));
  }

  async recordReplay(entry: ReplayAuditEntry): Promise<void> {
    await this.#session((s) => s.query(this.#sql.recordReplay(entry)));
  }

  /** The database's clock, which expiry, leases and retry times are measured on (for the late-message rule). */
  async now(): Promise<Date> {
    const rows = await this.#session((s) => s.query('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms'));
    return new Date(Number(rows[0]?.['ms']));
  }

  // ── pruning ─────────────────────────────────────────────────────────────────────────────────────────────

  async prune(options: PruneOptions = {}): Promise<PruneResult> {
    const batchSize = options.batchSize ?? DEFAULT_PRUNE_BATCH;
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError('batchSize must be a positive integer');
    const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
    return this.#session(async (s) => {
      const locked = (await s.query(this.#sql.tryPruneLock(this.#pruneKey)))[0]?.['locked'] === true;
      if (!locked) return { status: 'locked', deleted: 0, batches: 0 };
      try {
        if (options.dryRun === true) {
          const count = Number((await s.query(this.#sql.pruneCount(options)))[0]?.['count'] ?? 0);
          return { status: 'dry-run', deleted: count, batches: 0 };
        }
        let deleted = 0;
        let batches = 0;
        while (batches < maxBatches) {
          const n = Number((await s.query(this.#sql.pruneBatch({ ...options, batchSize })))[0]?.['deleted'] ?? 0);
          batches++;
          deleted += n;
          if (n < batchSize) break;
        }
        return { status: 'pruned', deleted, batches };
      } finally {
        await s.query(this.#sql.pruneUnlock(this.#pruneKey));
      }
    });
  }

  // ── inspection ──────────────────────────────────────────────────────────────────────────────────────────

  async findRows(consumer: string, messageIds: readonly string[]): Promise<InboxRow[]> {
    if (messageIds.length === 0) return [];
    const rows = await this.#session((s) => s.query(this.#sql.rows(consumer, messageIds)));
    return rows.map(toRow);
  }

  async countByStatus(filter: { readonly consumer?: string } = {}): Promise<StatusCount[]> {
    const rows = await this.#session((s) => s.query(this.#sql.countByStatus(filter.consumer)));
    return rows.map((r) => ({ consumer: String(r['consumer']), status: r['status'] as InboxStatus, count: Number(r['count']) }));
  }

  async countDeadLettersByReason(filter: { readonly consumer?: string } = {}): Promise<ReasonCount[]> {
    const rows = await this.#session((s) => s.query(this.#sql.countDeadLettersByReason(filter.consumer)));
    return rows.map((r) => ({ consumer: String(r['consumer']), reason: String(r['reason']), count: Number(r['count']) }));
  }

  async listDeadLetters(
    filter: InspectionFilter & { readonly reason?: string; readonly since?: Date; readonly until?: Date } = {},
  ): Promise<InboxRow[]> {
    const rows = await this.#session((s) => s.query(this.#sql.listDeadLetters({ ...filter, limit: limitOf(filter) })));
    return rows.map(toRow);
  }

  async listProcessing(filter: InspectionFilter = {}): Promise<ProcessingRow[]> {
    const rows = await this.#session((s) => s.query(this.#sql.listProcessing({ ...filter, limit: limitOf(filter) })));
    return rows.map((r) => ({ ...toRow(r), lease: r['lease'] as ProcessingRow['lease'], ageMs: Math.round(Number(r['age_ms'])) }));
  }

  async countExpiringSoon(filter: { readonly withinMs: number; readonly consumer?: string }): Promise<{ consumer: string; count: number }[]> {
    const rows = await this.#session((s) => s.query(this.#sql.countExpiringSoon(filter)));
    return rows.map((r) => ({ consumer: String(r['consumer']), count: Number(r['count']) }));
  }

  async listReplays(
    filter: InspectionFilter & { readonly messageId?: string; readonly replayId?: string } = {},
  ): Promise<ReplayAuditRow[]> {
    const rows = await this.#session((s) => s.query(this.#sql.listReplays({ ...filter, limit: limitOf(filter) })));
    return rows.map((r) => ({
      replayId: String(r['replay_id']),
      consumer: String(r['consumer']),
      messageId: String(r['message_id']),
      requestedBy: nullable(r['requested_by']) === null ? undefined : String(r['requested_by']),
      requestedAt: date(r['requested_at']) ?? undefined,
      at: date(r['at']) ?? new Date(0),
      outcome: String(r['outcome']),
    }));
  }

  // ── claims ──────────────────────────────────────────────────────────────────────────────────────────────

  /**
   * Sends BEGIN and the claim (which sets the lock timeout itself) — one round trip on node-postgres, the claim prepared on the
   * connection — and leaves the transaction open. Answers per id; an id whose row only became visible after the
   * claim's snapshot (a concurrent delivery committed it while we waited) is read again. On a lock timeout or a
   * lost race, rolls back and answers `busy`.
   *
   * One delivery on node-postgres takes the lean path first (`InboxStatements.preparedNewClaim`): an insert of
   * the new row and, when the id already has one, that row's state, in the same round trip. Only a row this
   * delivery may take over (a retry due, an expired lease, a replay) then needs the full claim statement.
   */
  async #claim(
    s: SqlSession,
    settings: ClaimSettings,
    rows: readonly ClaimRow[],
    target: 'completed' | 'processing',
    leaseMs?: number,
  ): Promise<Map<string, ClaimAnswer> | { readonly kind: 'busy'; readonly reason: BusyReason }> {
    const answers = new Map<string, ClaimAnswer>();
    let claimRows: Rows | undefined;
    for (let retried = false; ; retried = true) {
      const planned = this.#claimPlan(s, settings, rows, target, leaseMs);
      const plan = 'statement' in planned ? planned : await planned;
      try {
        const result = (await s.all(['BEGIN', plan.statement]))[1] ?? [];
        if (plan.kind === 'full') claimRows = result;
        else if (plan.kind === 'lean-batch') {
          // New ids were inserted; an id with a row answered `duplicate` or its state. Rows this batch may take
          // over go to the full claim (same transaction); any other state is the answer.
          claimRows = [];
          const byId = new Map(rows.map((r) => [r.messageId, r]));
          const takeOver: ClaimRow[] = [];
          for (const r of result) {
            if (r['claimed'] === true) {
              claimRows.push(r);
              continue;
            }
            if (r['duplicate'] === true) {
              answers.set(String(r['message_id']), DUPLICATE);
              continue;
            }
            const row = byId.get(String(r['message_id']));
            const state = toRowState(parseJson(r['state']));
            if (row !== undefined && claimableBy(state, row)) takeOver.push(row);
            else answers.set(String(r['message_id']), { claimed: false, state });
          }
          if (takeOver.length > 0) claimRows.push(...(await s.query(this.#sql.claim(settings, takeOver, target, leaseMs))));
        } else {
          // The lean claim of one delivery: the new row's attempt, or the existing row's state.
          const row = rows[0]!;
          const answer = result[0];
          if (answer !== undefined && answer['attempts'] !== null && answer['attempts'] !== undefined) {
            const claimed = { messageId: row.messageId, attempt: Number(answer['attempts']), from: 'new', leaseToken: row.leaseToken } as const;
            answers.set(row.messageId, { claimed, state: undefined });
            return answers;
          }
          if (answer !== undefined && answer['duplicate'] === true) {
            answers.set(row.messageId, DUPLICATE);
            return answers;
          }
          if (answer !== undefined && answer['state'] !== null && answer['state'] !== undefined) {
            const state = toRowState(parseJson(answer['state']));
            // A row this delivery may take over goes to the full claim (same transaction); any other is the answer.
            if (claimableBy(state, row)) claimRows = await s.query(this.#sql.claim(settings, rows, target, leaseMs));
            else answers.set(row.messageId, { claimed: false, state });
          }
          // Neither written nor read: the attempt is beyond maxAttempts, or a concurrent delivery committed the
          // row after this statement's snapshot (read again below).
        }
        break;
      } catch (error) {
        await s.rollbackQuietly();
        if (sqlState(error) === '26000' && !retried) {
          // The session lost its prepared statements (DISCARD ALL, a pooler): prepare again, once.
          this.#preparedOn.delete(s.connection);
          if (++this.#missingPrepared >= 3) this.#usePrepared = false;
          continue;
        }
        const busy = busyReason(error);
        if (busy !== undefined) return { kind: 'busy', reason: busy };
        throw error;
      }
    }
    for (const r of claimRows ?? []) {
      const id = String(r['message_id']);
      if (r['claimed'] === true) {
        answers.set(id, {
          claimed: {
            messageId: id,
            attempt: Number(r['attempts']),
            from: (r['claimed_from'] as ClaimedFrom | null) ?? 'new',
            leaseToken: (r['lease_token'] as string | null) ?? null,
          },
          state: undefined,
        });
      } else if (r['state'] !== null && r['state'] !== undefined) {
        answers.set(id, { claimed: false, state: toRowState(parseJson(r['state'])) });
      }
    }
    const unseen = rows.filter((r) => !answers.has(r.messageId)).map((r) => r.messageId);
    if (unseen.length > 0) {
      for (const r of await s.query(this.#sql.rows(settings.consumer, unseen))) {
        answers.set(String(r['message_id']), { claimed: false, state: toRowState(r) });
      }
    }
    // A delivery the claim left alone only because its attempt would exceed maxAttempts is dead-lettered here,
    // without running: rare (crash loops, broker counts), so the claim statement itself stays simple.
    for (const row of rows) {
      const answer = answers.get(row.messageId);
      if (answer !== undefined && (answer.claimed !== false || 'duplicate' in answer)) continue;
      const state = answer?.state;
      const next = nextAttempt(state, row);
      if (next <= settings.maxAttempts || (state !== undefined && !claimableBy(state, row))) continue;
      const written = await s.query(
        state === undefined ? this.#sql.exhaustNew(settings, row, next) : this.#sql.exhaust(settings, row, next),
      );
      const exhausted = written[0]?.['state'];
      if (exhausted === undefined || exhausted === null) continue; // lost a race: the answer stands
      const after = toRowState(parseJson(exhausted));
      answers.set(row.messageId, {
        claimed: { messageId: row.messageId, attempt: next, from: after.claimedFrom ?? 'new', leaseToken: null },
        state: after,
      });
    }
    return answers;
  }

  /**
   * A statement handler's statements as `EXECUTE`s of statements prepared on this connection, so that they and
   * the COMMIT share one round trip: each is the SQL Kysely compiled, prepared as it is (Postgres infers the
   * parameter types as it does for bind parameters), executed with its parameters as literals. A statement not
   * yet prepared here is named in `prepare` instead: this delivery runs `work`, and the statement is prepared
   * after its transaction, outside any (a statement Postgres will not prepare alone must not abort a
   * transaction). `undefined` when the statements take the usual path for good or for now: no pipelining or
   * prepared statements, the builder threw (`work` throws it again), a parameter that cannot travel as text, a
   * statement that would not prepare, too many distinct statements on the connection.
   */
  #effectPlan(s: SqlSession, effect: ClaimEffect): { readonly executes?: string[]; readonly prepare?: Map<string, string> } | undefined {
    if (!s.pipelined || !this.#usePrepared) return undefined;
    let statements: ReturnType<ClaimEffect['statements']>;
    try {
      statements = effect.statements();
    } catch {
      return undefined;
    }
    const toText = this.#parameterText;
    if (toText === undefined || statements.length === 0) return undefined;
    const known = this.#preparedOn.get(s.connection);
    const executes: string[] = [];
    let prepare: Map<string, string> | undefined;
    for (const statement of statements) {
      if (this.#unpreparable.has(statement.sql)) return undefined;
      let name = this.#effectNames.get(statement.sql);
      if (name === undefined) {
        name = `inboxkit_fx_${createHash('sha256').update(statement.sql).digest('hex').slice(0, 16)}`;
        if (this.#effectNames.size >= MAX_PREPARED_EFFECTS) this.#effectNames.clear();
        this.#effectNames.set(statement.sql, name);
      }
      if (toText === null || known === undefined || !known.has(name)) {
        // A bounded number per connection: SQL built anew per message would otherwise fill the backend.
        if (known !== undefined && known.size >= MAX_PREPARED_EFFECTS) return undefined;
        (prepare ??= new Map()).set(name, statement.sql);
        continue;
      }
      const args = executeArguments(statement.parameters, toText);
      if (args === undefined) return undefined;
      executes.push(args.length === 0 ? `EXECUTE ${name}` : `EXECUTE ${name} (${args.join(', ')})`);
    }
    return prepare === undefined ? { executes } : { prepare };
  }

  /**
   * Sends statement handlers' `EXECUTE`s and the COMMIT in one round trip. Resolves to the statement's error when
   * one failed, with the transaction rolled back; throws `StoreUnavailableError` when the connection was lost.
   */
  async #commitWith(s: SqlSession, executes: readonly string[]): Promise<unknown> {
    const error = await s.finish([...executes, 'COMMIT']);
    if (error === undefined) return undefined;
    if (sqlState(error) === '26000') this.#preparedOn.delete(s.connection);
    s.assertAlive();
    if (s.inTransaction) await s.rollbackQuietly();
    return error;
  }

  /** Prepares a statement handler's statements on the session's connection (no transaction open). */
  async #prepareEffects(s: SqlSession, prepare: ReadonlyMap<string, string>): Promise<void> {
    this.#parameterText ??= await loadPgParameterText();
    let known = this.#preparedOn.get(s.connection);
    if (known === undefined) {
      known = new Set();
      this.#preparedOn.set(s.connection, known);
    }
    for (const [name, sql] of prepare) {
      try {
        await s.query(`PREPARE ${name} AS ${sql}`);
      } catch (error) {
        if (sqlState(error) !== '42P05') {
          // Postgres could not prepare it alone (a parameter type it cannot infer, several statements …).
          if (this.#unpreparable.size >= MAX_PREPARED_EFFECTS) this.#unpreparable.clear();
          this.#unpreparable.add(sql);
          continue;
        }
      }
      known.add(name);
    }
  }

  /**
   * The claim statement sent after BEGIN: for one delivery on node-postgres the lean claim, prepared on the
   * connection on first use (see `#claim`); for a batch of new ids the lean batch claim (literal SQL); else the
   * full claim, literal SQL (a batch with ids expected to have rows, another driver, or with prepared
   * statements turned off).
   */
  #claimPlan(
    s: SqlSession,
    settings: ClaimSettings,
    rows: readonly ClaimRow[],
    target: 'completed' | 'processing',
    leaseMs?: number,
  ): ClaimPlan | Promise<ClaimPlan> {
    if (rows.length > 1 && !rows.some((r) => r.expectsRow === true)) {
      return { statement: this.#sql.leanClaim(settings, rows, target, leaseMs), kind: 'lean-batch' };
    }
    if (rows.length !== 1 || !s.pipelined || !this.#usePrepared) {
      return { statement: this.#sql.claim(settings, rows, target, leaseMs), kind: 'full' };
    }
    let known = this.#preparedOn.get(s.connection);
    if (known === undefined) {
      known = new Set();
      this.#preparedOn.set(s.connection, known);
    }
    const row = rows[0]!;
    // An id that probably has a row goes straight to the full claim (prepared too), one round trip with BEGIN.
    const takeOver = row.expectsRow === true;
    const prepared = (takeOver ? this.#takeOverClaims : this.#newClaims)[target];
    const plan: ClaimPlan = { statement: prepared.claim(settings, row, leaseMs), kind: takeOver ? 'full' : 'lean-one' };
    if (known.has(prepared.name)) return plan;
    const remember = known;
    return s.query(prepared.prepare).then(
      () => (remember.add(prepared.name), plan),
      (error: unknown) => {
        if (sqlState(error) !== '42P05') throw error; // 42P05: already prepared on this session
        remember.add(prepared.name);
        return plan;
      },
    );
  }

  // ── plumbing ────────────────────────────────────────────────────────────────────────────────────────────

  /**
   * `#session` for a single delivery's transactional claim, which may leave its connection parked: a duplicate
   * wrote nothing, and its ROLLBACK, sent on its own, would cost a round trip as dear as the claim's on both
   * sides (a write, a wake-up of the backend, an answer, a wake-up of Node) while nobody waits for it. So the
   * session defers it (`SqlSession.deferRollback`) and keeps the connection out of the pool until the next
   * claim on this store takes it, sending `ROLLBACK; BEGIN; claim` in one round trip, or until the event loop's
   * next turn (`setImmediate`), when the ROLLBACK goes out alone and the connection goes back to the pool. A
   * connection is never parked longer than that, so the application's pool barely notices; under load, a
   * consumer's next delivery arrives within the same turn (pgbench-like raw test: 4,527–5,928 → 7,383–9,162
   * duplicates/s; `bench/core-cpu.ts` has the inbox's own figures).
   */
  async #claimSession<T>(fn: (session: SqlSession) => Promise<T>): Promise<T> {
    const lend = this.#parked.pop();
    if (lend !== undefined) {
      // The parked connection's loop runs `fn` in this caller's async context (AsyncLocalStorage, OpenTelemetry
      // context, a test's crash probe), not in that of the delivery that parked it.
      // (An AsyncResource run directly: AsyncResource.bind costs two deprecate() wrappers per call.)
      const context = new AsyncResource('inboxkit.claim');
      const own = (session: SqlSession): Promise<T> => context.runInAsyncScope(fn, undefined, session);
      return new Promise<T>((resolve, reject) => lend({ fn: own, resolve, reject } as Borrower<unknown>));
    }
    const runner = this.#knownRunner !== null ? this.#knownRunner : await this.#pipelineRunner();
    if (runner === undefined) return this.#session(fn);
    return new Promise<T>((resolve, reject) => {
      const first = { fn, resolve, reject } as Borrower<unknown>;
      this.#raw
        .provideConnection((connection) => holding(connection, runner, (s) => this.#serve(s, first)))
        .catch((error: unknown) => reject(unavailable(error)));
    });
  }

  /** Runs borrowers on one held connection for as long as each leaves it with a deferred ROLLBACK. */
  async #serve(s: SqlSession, first: Borrower<unknown>): Promise<void> {
    for (let borrower: Borrower<unknown> | undefined = first; borrower !== undefined; ) {
      let value: unknown;
      try {
        value = await borrower.fn(s);
      } catch (error) {
        borrower.reject(unavailable(error)); // `holding` ends any transaction left open
        return;
      }
      borrower.resolve(value);
      if (!s.rollbackOwed) return;
      if (s.broken) break;
      borrower = await new Promise<Borrower<unknown> | undefined>((take) => {
        this.#parked.push(take);
        setImmediate(() => {
          const at = this.#parked.indexOf(take);
          if (at < 0) return; // lent meanwhile
          this.#parked.splice(at, 1);
          take(undefined);
        });
      });
    }
    await s.rollbackUnawaited();
  }

  /** Borrows a connection for `fn`; any failure that escapes becomes a `StoreUnavailableError`. */
  async #session<T>(fn: (session: SqlSession) => Promise<T>): Promise<T> {
    const runner = this.#knownRunner !== null ? this.#knownRunner : await this.#pipelineRunner();
    try {
      // Never hand a connection back to the application's pool inside our transaction, and never hold one
      // without a guard against its backend dying meanwhile (held-connection.ts).
      return await this.#raw.provideConnection((connection) => holding(connection, runner, fn));
    } catch (error) {
      throw unavailable(error);
    }
  }

  /** Detects, once, whether the driver is node-postgres and can share round trips. */
  async #pipelineRunner(): Promise<PipelineRunner | undefined> {
    if (this.#pipelining === 'off') return undefined;
    this.#runner ??= this.#probe();
    const runner = await this.#runner;
    if (this.#runner !== undefined) this.#knownRunner = runner;
    return runner;
  }

  async #probe(): Promise<PipelineRunner | undefined> {
    const runner = await loadPgPipelineRunner();
    if (runner === undefined) return undefined;
    let connected = false;
    try {
      const rows = await this.#raw.provideConnection(async (connection) => {
        connected = true;
        // Only Kysely's PostgresDialect connection passes `sql` to pg.Client#query untouched; other drivers
        // (PGlite …) are never handed a Submittable, which could confuse their protocol state.
        if (connection.constructor?.name !== 'PostgresConnection') return [];
        return runner(connection, 'SELECT 1 AS a; SELECT 2 AS b');
      });
      return rows.length === 2 && rows[1]?.[0]?.['b'] === 2 ? runner : undefined;
    } catch {
      // Could not even connect: decide on the next call instead of disabling the fast path for good.
      if (!connected) this.#runner = undefined;
      return undefined;
    }
  }
}

function unavailable(error: unknown): Error {
  if (isInboxkitError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new StoreUnavailableError(`the inbox store failed: ${message}`, { cause: error });
}

function busyReason(error: unknown): BusyReason | undefined {
  switch (sqlState(error)) {
    case '55P03':
      return 'lock-timeout';
    case '40001':
    case '40P01':
      return 'contended';
    default:
      return undefined;
  }
}

function abortedTransactionError(): Error {
  return new Error('the handler left its transaction aborted (a failed statement was caught and ignored): nothing was committed');
}

function limitOf(filter: InspectionFilter): number {
  const limit = filter.limit ?? DEFAULT_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError('limit must be a positive integer');
  return limit;
}

function nullable(value: unknown): unknown {
  return value === undefined ? null : value;
}

function date(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  const d = value instanceof Date ? value : new Date(typeof value === 'string' || typeof value === 'number' ? value : NaN);
  return Number.isNaN(d.getTime()) ? null : d;
}

function errorInfo(value: unknown): ErrorInfo | null {
  if (value === null || value === undefined) return null;
  const parsed = typeof value === 'string' ? (JSON.parse(value) as unknown) : value;
  return typeof parsed === 'object' && parsed !== null ? (parsed as ErrorInfo) : null;
}

function toRow(r: Record<string, unknown>): InboxRow {
  return {
    consumer: String(r['consumer']),
    messageId: String(r['message_id']),
    status: r['status'] as InboxStatus,
    fingerprint: (nullable(r['fingerprint']) as string | null) ?? null,
    attempts: Number(r['attempts']),
    startedAttempts: Number(r['started_attempts']),
    leaseToken: (nullable(r['lease_token']) as string | null) ?? null,
    lockedUntil: date(r['locked_until']),
    availableAt: date(r['available_at']) ?? new Date(0),
    receivedAt: date(r['received_at']) ?? new Date(0),
    messageTimestamp: date(r['message_timestamp']),
    completedAt: date(r['completed_at']),
    expiresAt: date(r['expires_at']) ?? new Date(0),
    lastError: errorInfo(r['last_error']),
    deadLetterReason: (nullable(r['dead_letter_reason']) as string | null) ?? null,
    deadLetteredAt: date(r['dead_lettered_at']),
    replayCount: Number(r['replay_count']),
    lastReplayId: (nullable(r['last_replay_id']) as string | null) ?? null,
    firstFailureAt: date(r['first_failure_at']),
    lastFailureAt: date(r['last_failure_at']),
    claimedFrom: (nullable(r['claimed_from']) as ClaimedFrom | null) ?? null,
  };
}

function toRowState(r: Record<string, unknown>): InboxRowState {
  return {
    ...toRow(r),
    availableInMs: Math.ceil(Number(r['available_in_ms'] ?? 0)),
    leaseRemainingMs: Math.ceil(Number(r['lease_remaining_ms'] ?? 0)),
  };
}

/** The attempt a claim would give `row` (see InboxStatements.claim). */
function nextAttempt(state: InboxRowState | undefined, row: ClaimRequest): number {
  const deliveries = Math.max(1, row.deliveryCount);
  if (state === undefined || state.status === 'dead_lettered') return deliveries;
  return Math.max(state.attempts + 1, state.startedAttempts, deliveries);
}

/** The claim's `claimable` rule, on a row state read in the same transaction. */
function claimableBy(state: InboxRowState, row: ClaimRequest): boolean {
  if (state.fingerprint !== null && state.fingerprint !== row.fingerprint) return false;
  switch (state.status) {
    case 'failed':
      return state.availableInMs <= 0;
    case 'processing':
      return state.lockedUntil === null || state.leaseRemainingMs <= 0;
    case 'dead_lettered':
      return row.replayId !== undefined && row.replayId !== state.lastReplayId;
    case 'completed':
      return false;
  }
}

function parseJson(value: unknown): Record<string, unknown> {
  return (typeof value === 'string' ? JSON.parse(value) : value) as Record<string, unknown>;
}
