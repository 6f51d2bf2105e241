// The inbox on Postgres, through one seam (sql-seam.ts) that it is given: any SQL library's (packages/data), or
// the Kysely seam, which ../kysely/postgres-inbox-store.ts builds from `{ db }` for the public
// `PostgresInboxStore`. This folder never imports ../kysely (an eslint rule keeps it so: docs/core.md, "Seams").
// The store never creates or destroys a client; every
// statement it sends is in inbox-sql.ts (the state machine), inbox-inspection.ts (the reads) or
// inbox-operator-sql.ts (operators' acts), and it knows no driver.

import { randomUUID } from 'node:crypto';
import { ConfigurationError, findTransactionControl, StoreUnavailableError } from '../errors.js';
import { amendmentOutcome, forgetOutcome } from '../operator-audit.js';
import type {
  AmendmentResult,
  BatchRun,
  BusyReason,
  ClaimedDelivery,
  ClaimEffect,
  ClaimRequest,
  ClaimSettings,
  FailureRecord,
  FailureWrite,
  ForgetRequest,
  ForgetResult,
  InboxRow,
  InboxStatus,
  InboxStore,
  LeaseClaim,
  LeaseRun,
  PayloadAmendment,
  ReplayAuditEntry,
  TransactionalRun,
} from '../store.js';
import { batchRuns, BUSY_CONTENDED, busyOf, claimAnswer, claimedOf, completedOr, failureWrite, row, unclaimed } from './inbox-answer.js';
import { InboxInspection, storeUnavailable as unavailable } from './inbox-inspection.js';
import { InboxOperatorSql } from './inbox-operator-sql.js';
import { databaseIdentity } from './database-identity.js';
import { InboxSql } from './inbox-sql.js';
import { resolveInboxTableNames, type InboxTableOptions } from './inbox-table-names.js';
import { isStatementError, sqlState, type SeamTransaction, type SqlSeam, type SqlStatement, type StatementFastPath } from './sql-seam.js';

/** Options of `PostgresInboxStore` common to every seam. */
export interface InboxStoreOptions extends InboxTableOptions {
  /**
   * How `handleBatch` isolates messages. `on-failure`: the batch first runs without savepoints; if a handler
   * fails, that transaction is rolled back and the batch runs again with a savepoint per message, so the
   * failure is recorded and the others commit. Handlers of a failing batch may therefore run twice (their
   * transaction effects once). `always`: a savepoint before every message. Default is `on-failure`.
   */
  readonly batchSavepoints?: 'on-failure' | 'always';
  /**
   * Layout `daily-partitions` only: before a claim of an id looks for its row, it serialises with every other
   * claim of the id (an advisory transaction lock on hash(consumer, id)) and takes the day of the row the id
   * already has in any partition. So one intent re-published as a new record stamped on another UTC day (an
   * outbox resent after a crash, a re-snapshot of a CDC pipeline) is a duplicate, or a `payload-mismatch` dead
   * letter when its payload changed, instead of a second effect. Costs a lock and one index probe per day
   * partition on each claim (docs/benchmarks.md, "Partitions"); turn it off only when every resend of an intent
   * carries the same day (the same broker timestamp, CloudEvents `time` or `dayOf`). Default is true.
   *
   * @example
   * new PostgresInboxStore({ db, layout: 'daily-partitions', crossDayCheck: false });
   */
  readonly crossDayCheck?: boolean;
}

/** Options of `PostgresInboxStore` (and `SeamInboxStore`) over any SQL library's seam. */
export interface SeamInboxStoreOptions<Tx> extends InboxStoreOptions {
  /** How the store reaches Postgres, and the transaction type handlers get (see `SqlSeam`). */
  readonly seam: SqlSeam<Tx>;
}

type BatchWork<Tx> = (tx: Tx, claimed: ClaimedDelivery, index: number) => Promise<void>;
type BatchFailure = (claimed: ClaimedDelivery, error: unknown, index: number) => FailureRecord;

/**
 * The Postgres inbox over the seam it is given: every behaviour of `PostgresInboxStore`, which is this class
 * with the Kysely seam built from `{ db }`. Tables and functions come from `migrateInbox(db)` /
 * `inboxMigrations()` or the SQL in `migrations/` (default `inboxkit.inbox`, `inboxkit.inbox_details` and
 * `inboxkit.inbox_replays`). Handlers get the seam's transaction, which commits with the inbox row. Throws a
 * `StoreUnavailableError` without `seam`.
 *
 * @example
 * const store = new SeamInboxStore({ seam: pgSeam(pool) }); // @inboxkit/data/pg; or new PostgresInboxStore({ seam })
 */
export class SeamInboxStore<Tx = unknown> extends InboxInspection implements InboxStore<Tx> {
  readonly kind = 'postgres';
  readonly #seam: SqlSeam<Tx>;
  readonly #sql: InboxSql;
  readonly #operator: InboxOperatorSql;
  readonly #fast: StatementFastPath | undefined;
  readonly #batchSavepoints: 'on-failure' | 'always';
  #identity: Promise<string> | undefined;

  constructor(options: SeamInboxStoreOptions<Tx>) {
    const seam = (options as Partial<SeamInboxStoreOptions<Tx>> | undefined)?.seam;
    if (seam === undefined || seam === null) {
      throw new StoreUnavailableError('SeamInboxStore needs { seam }: a SqlSeam (or use PostgresInboxStore with { db })');
    }
    super(seam, resolveInboxTableNames(options));
    this.#seam = seam;
    if (options.crossDayCheck !== undefined && typeof options.crossDayCheck !== 'boolean') {
      throw new ConfigurationError(`crossDayCheck must be a boolean, got ${JSON.stringify(options.crossDayCheck)}`);
    }
    this.#sql = new InboxSql(this.names, { crossDayCheck: options.crossDayCheck ?? true });
    this.#operator = new InboxOperatorSql(this.names);
    this.#fast = seam.statementFastPath;
    this.#batchSavepoints = options.batchSavepoints ?? 'on-failure';
  }

  // ── message path ────────────────────────────────────────────────────────────────────────────────────────

  async runTransactional<T>(
    settings: ClaimSettings,
    request: ClaimRequest,
    work: (tx: Tx, claimed: ClaimedDelivery) => Promise<T>,
    effect?: ClaimEffect,
  ): Promise<TransactionalRun<T>> {
    if (effect !== undefined) {
      const [run] = (await this.#once(settings, [request], [effect])) ?? [];
      // Claimed: the statements ran and committed with the claim.
      if (run !== undefined) return (run.kind === 'completed' ? { ...run, value: undefined } : run) as TransactionalRun<T>;
    }
    let claimed: ClaimedDelivery | undefined;
    let committing = false;
    try {
      return await this.#seam.transaction<TransactionalRun<T>>(
        async (t, first) => {
          const answer = claimAnswer(first[0]?.['answer']);
          if (answer.kind !== 'claimed') return { end: answer.kind === 'exhausted' ? 'commit' : 'release', value: unclaimed(answer) };
          const delivery = (claimed = claimedOf(request, answer));
          let value: T;
          try {
            value = await work(t.tx, delivery);
          } catch (error) {
            return { end: 'rollback', value: { kind: 'failed', claimed: delivery, error: t.transactionControl?.() ?? error } };
          }
          // The handler sent COMMIT or ROLLBACK through tx (refused, never sent) and went on: fail it all the same.
          const control = t.transactionControl?.();
          if (control !== undefined) return { end: 'rollback', value: { kind: 'failed', claimed: delivery, error: control } };
          committing = true;
          return { end: 'commit', value: { kind: 'completed', claimed: delivery, value } };
        },
        { first: this.#sql.claim(settings, request) },
      );
    } catch (error) {
      // The seam found the handler's transaction ended under it: the attempt failed, whatever committed meanwhile.
      if (claimed !== undefined && findTransactionControl(error) !== undefined) return { kind: 'failed', claimed, error };
      // COMMIT refused (an aborted transaction, a deferred constraint, a serialization failure): the attempt failed.
      if (committing && claimed !== undefined && isStatementError(error)) return { kind: 'failed', claimed, error: commitError(error) };
      if (claimed === undefined && busyOf(error) !== undefined) return busyOf(error)!;
      throw unavailable(error);
    }
  }

  async runTransactionalBatch(
    settings: ClaimSettings,
    requests: readonly ClaimRequest[],
    work: BatchWork<Tx>,
    onFailure: BatchFailure,
    effects?: readonly (ClaimEffect | undefined)[],
  ): Promise<BatchRun[]> {
    if (requests.length === 0) return [];
    if (effects !== undefined && this.#batchSavepoints === 'on-failure') {
      const runs = await this.#once(settings, requests, effects);
      if (runs !== undefined) return runs;
    }
    if (this.#batchSavepoints === 'on-failure') {
      const optimistic = await this.#runBatch(settings, requests, work, onFailure, false);
      if (optimistic !== 'rerun') return optimistic;
    }
    const isolated = await this.#runBatch(settings, requests, work, onFailure, true);
    return isolated === 'rerun' ? requests.map(() => BUSY_CONTENDED) : isolated;
  }

  /**
   * Statement handlers' deliveries (one, or a batch) with their claim in one round trip, when the seam can and
   * every message has its statements: their runs, or `undefined` (then the usual path).
   */
  async #once(settings: ClaimSettings, requests: readonly ClaimRequest[], effects: readonly (ClaimEffect | undefined)[]): Promise<BatchRun[] | undefined> {
    if (this.#fast === undefined) return undefined;
    // One delivery's claim answers under an empty message id.
    const one = requests.length === 1 ? requests[0] : undefined;
    const statements: { owner: string; statement: SqlStatement }[] = [];
    for (const [i, request] of requests.entries()) {
      const built = statementsOf(effects[i]);
      if (built === undefined) return undefined;
      for (const statement of built) statements.push({ owner: one === undefined ? request.messageId : '', statement });
    }
    const claim = one === undefined ? this.#sql.claimBatch(settings, requests) : this.#sql.claim(settings, one, undefined, true);
    const rows = await busyOr(() => this.#fast!.run(claim, statements));
    if (rows === undefined || !Array.isArray(rows)) return rows && requests.map(() => rows);
    return one === undefined ? batchRuns(requests, rows) : [completedOr(one, claimAnswer(rows[0]?.['answer']))];
  }

  /**
   * One pass of a batch in one transaction. Without savepoints (the optimistic pass), a handler failure rolls
   * the whole transaction back and answers `rerun`; with a savepoint per message, a failure rolls back only that
   * message, whose failure is then recorded in the same transaction.
   */
  async #runBatch(
    settings: ClaimSettings,
    requests: readonly ClaimRequest[],
    work: BatchWork<Tx>,
    onFailure: BatchFailure,
    savepoints: boolean,
  ): Promise<BatchRun[] | 'rerun'> {
    let worked = false;
    let results: BatchRun[] = [];
    try {
      return await this.#seam.transaction<BatchRun[] | 'rerun'>(
        async (t, first) => {
          worked = true;
          results = batchRuns(requests, first);
          const failures: Failure[] = [];
          for (let i = 0; i < results.length; i++) {
            const run = results[i]!;
            if (run.kind !== 'completed') continue;
            if (savepoints) await this.#savepoint(t, i, results, failures);
            try {
              await work(t.tx, run.claimed, i);
              // Transaction control the seam refused (never sent): this message fails as if it had thrown.
              const control = t.transactionControl?.();
              if (control !== undefined) throw control;
            } catch (thrown) {
              const error = t.transactionControl?.() ?? thrown;
              if (!savepoints) return { end: 'rollback', value: 'rerun' };
              await t.query(ROLLBACK_TO_SAVEPOINT);
              failures.push({ index: i, claimed: run.claimed, error });
            }
          }
          for (const f of failures) {
            const [written] = await t.query(this.#sql.fail(settings, onFailure(f.claimed, f.error, f.index), true));
            results[f.index] = { kind: 'failed', claimed: f.claimed, error: f.error, write: failureWrite(written?.['answer']) };
          }
          return { end: 'commit', value: results };
        },
        { first: this.#sql.claimBatch(settings, requests) },
      );
    } catch (error) {
      if (!worked && busyOf(error) !== undefined) return requests.map(() => busyOf(error)!);
      // The last handler left the transaction aborted (a failed statement it caught): nothing committed.
      if (worked && sqlState(error) === '25P02') return 'rerun';
      // A handler ended the batch's transaction under the seam: what committed is unknown, and running the batch
      // again would answer duplicate for what did. Every claimed message fails with it (an operator looks).
      if (worked && findTransactionControl(error) !== undefined) return this.#allFailed(settings, results, onFailure, error);
      throw unavailable(error);
    }
  }

  /** Every message of a batch whose transaction a handler ended: each failure recorded in its own transaction. */
  async #allFailed(settings: ClaimSettings, results: readonly BatchRun[], onFailure: BatchFailure, error: unknown): Promise<BatchRun[]> {
    const runs: BatchRun[] = [];
    for (const [index, run] of results.entries()) {
      if (run.kind !== 'completed' && run.kind !== 'failed') runs.push(run);
      else runs.push({ ...run, kind: 'failed', error, write: await this.recordFailure(settings, onFailure(run.claimed, error, index)) });
    }
    return runs;
  }

  /**
   * The savepoint before message `index`. When it fails because the previous handler resolved but left the
   * transaction aborted (it swallowed a failed statement), that message is rolled back and counted as failed.
   */
  async #savepoint(t: SeamTransaction<Tx>, index: number, results: BatchRun[], failures: Failure[]): Promise<void> {
    try {
      await t.query(SAVEPOINT);
    } catch (error) {
      if (sqlState(error) !== '25P02' || index === 0) throw error;
      await t.query(ROLLBACK_TO_SAVEPOINT);
      for (let k = index - 1; k >= 0; k--) {
        const previous = results[k];
        if (previous?.kind === 'completed' && !failures.some((f) => f.index === k)) {
          failures.push({ index: k, claimed: previous.claimed, error: abortedTransactionError() });
          break;
        }
      }
      await t.query(SAVEPOINT);
    }
  }

  async claimLease(settings: ClaimSettings & { readonly leaseMs: number }, request: ClaimRequest): Promise<LeaseClaim> {
    const token = randomUUID();
    // An autocommit statement: the lease commits with the claim.
    const rows = await busyOr(() => this.#seam.query(this.#sql.claim(settings, request, { token, ms: settings.leaseMs })));
    if (!Array.isArray(rows)) return rows;
    const answer = claimAnswer(rows[0]?.['answer']);
    return answer.kind === 'claimed' ? { kind: 'claimed', claimed: { ...claimedOf(request, answer), leaseToken: token } } : unclaimed(answer);
  }

  async completeLease<T>(settings: ClaimSettings, claimed: ClaimedDelivery, work: (tx: Tx) => Promise<T>): Promise<LeaseRun<T>> {
    if (claimed.leaseToken === null) throw new TypeError('completeLease needs a leased claim');
    const fence = this.#sql.completeLease(settings, claimed.messageId, claimed.leaseToken);
    let committing = false;
    try {
      return await this.#seam.transaction<LeaseRun<T>>(
        async (t) => {
          let value: T;
          try {
            value = await work(t.tx);
          } catch (error) {
            return { end: 'rollback', value: { kind: 'failed', error: t.transactionControl?.() ?? error } };
          }
          const control = t.transactionControl?.();
          if (control !== undefined) return { end: 'rollback', value: { kind: 'failed', error: control } };
          const [fenced] = await t.query(fence);
          if (fenced?.['completed'] !== true) return { end: 'rollback', value: { kind: 'lease-lost' } };
          committing = true;
          return { end: 'commit', value: { kind: 'completed', value } };
        },
        { lazy: true },
      );
    } catch (error) {
      if (findTransactionControl(error) !== undefined) return { kind: 'failed', error };
      if (committing && isStatementError(error)) return { kind: 'failed', error: commitError(error) };
      if (sqlState(error) === '25P02') return { kind: 'failed', error: abortedTransactionError() };
      throw unavailable(error);
    }
  }

  async recordFailure(settings: ClaimSettings, failure: FailureRecord): Promise<FailureWrite> {
    const [written] = await this.query(this.#sql.fail(settings, failure));
    return failureWrite(written?.['answer']);
  }

  async recordAttemptsStarted(settings: ClaimSettings, messageIds: readonly string[], timestamps?: readonly (Date | undefined)[]): Promise<void> {
    if (messageIds.length === 0) return;
    await this.query(this.#sql.recordAttemptsStarted(settings, messageIds, timestamps));
  }

  async recordReplay(entry: ReplayAuditEntry): Promise<void> {
    await this.query(this.#operator.replayAudit(entry));
  }

  async amendDeadLetter(amendment: PayloadAmendment): Promise<AmendmentResult> {
    const outcome = amendmentOutcome(amendment.fromFingerprint, amendment.toFingerprint, amendment.reason);
    return this.#operatorAct(amendment.consumer, amendment.messageId, 'dead_lettered', async (t, current, day) => {
      if (current === undefined) return { kind: 'no-row' };
      if (current.status !== 'dead_lettered') return { kind: 'not-dead-lettered', row: current };
      if (current.fingerprint !== amendment.fromFingerprint) return { kind: 'fingerprint-changed', row: current };
      await t.query(this.#operator.amend(amendment, outcome, day));
      return { kind: 'amended', row: { ...current, fingerprint: amendment.toFingerprint } };
    });
  }

  /** `postgres:<system identifier>:<database>:<schema-qualified table>`, read once (see `InboxStore#identity`). */
  identity(): Promise<string> {
    const reading = (this.#identity ??= databaseIdentity((statement) => this.#seam.query(statement), this.names.qualifiedTable));
    // A failure (an outage at start) is not kept: the next call reads again.
    reading.catch(() => {
      if (this.#identity === reading) this.#identity = undefined;
    });
    return reading;
  }

  async forgetCompleted(request: ForgetRequest): Promise<ForgetResult> {
    return this.#operatorAct(request.consumer, request.messageId, 'completed', async (t, current, day) => {
      if (current === undefined) return { kind: 'no-row' };
      if (current.status !== 'completed') return { kind: 'not-completed', row: current };
      await t.query(this.#operator.forget(request, forgetOutcome(current.fingerprint, request.reason), day));
      return { kind: 'forgotten', row: current };
    });
  }

  /**
   * An operator's act on one row: in a transaction whose lock waits are bounded, the row locked and read (of an
   * id's rows on several days, the one in state `wanted`), then `act` (which writes only when the row is what
   * it expects, on the row's `day` in the partitioned layout). A delivery holding the row past the bound is a
   * `StoreUnavailableError` saying to try again.
   */
  async #operatorAct<R extends { readonly kind: string }>(
    consumer: string,
    messageId: string,
    wanted: InboxStatus,
    act: (t: SeamTransaction<Tx>, current: InboxRow | undefined, day: string | undefined) => Promise<R>,
  ): Promise<R> {
    try {
      return await this.#seam.transaction<R>(
        async (t) => {
          const [locked] = await t.query(this.#operator.lockRow(consumer, messageId, wanted));
          const day = locked?.['day'];
          const value = await act(t, locked === undefined ? undefined : row(locked['row']), typeof day === 'string' ? day : undefined);
          return { end: 'commit', value };
        },
        { first: this.#operator.lockTimeout() },
      );
    } catch (error) {
      if (sqlState(error) === '55P03') {
        throw new StoreUnavailableError('a delivery of this message holds its inbox row: nothing was changed; try again in a moment', {
          cause: error,
        });
      }
      throw unavailable(error);
    }
  }
}

type Failure = { readonly index: number; readonly claimed: ClaimedDelivery; readonly error: unknown };
const SAVEPOINT: SqlStatement = { sql: 'SAVEPOINT inboxkit_message', parameters: [] };
const ROLLBACK_TO_SAVEPOINT: SqlStatement = { sql: 'ROLLBACK TO SAVEPOINT inboxkit_message', parameters: [] };

/** A statement handler's statements, or `undefined` when its builder throws (the handler then throws the same). */
function statementsOf(effect: ClaimEffect | undefined): readonly SqlStatement[] | undefined {
  try {
    return effect?.statements();
  } catch {
    return undefined;
  }
}

/** `fn`'s result, `busy` when it met a lock timeout or lost a race, or a `StoreUnavailableError`. */
async function busyOr<T>(fn: () => Promise<T>): Promise<T | { readonly kind: 'busy'; readonly reason: BusyReason }> {
  try {
    return await fn();
  } catch (error) {
    const busy = busyOf(error);
    if (busy !== undefined) return busy;
    throw unavailable(error);
  }
}

function commitError(error: unknown): unknown {
  return sqlState(error) === '25P02' ? abortedTransactionError() : error;
}

function abortedTransactionError(): Error {
  return new Error('the handler left its transaction aborted (a failed statement was caught and ignored): nothing was committed');
}
