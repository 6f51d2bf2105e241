// The legal-transition guard: a row's state moves only along a declared state machine. Events arrive late and
// twice (a retried `payment.authorized` after `payment.captured`); applying them blindly walks a captured
// payment back to authorized. An illegal transition must change nothing and fail the message permanently.

import type { MeterProvider } from '@opentelemetry/api';
import { ConfigurationError, PermanentError } from '../errors.js';
import { patternCounter, PATTERN_METRIC_NAMES } from './pattern-metrics.js';
import { sqlExecutorOf, type SqlTransaction } from './sql-executor.js';
import { quoteIdentifier, quoteTable, tableLabel, type TableName } from './sql-identifier.js';

/** A declared state machine: its states and, for each, the states it may move to. Made by `defineStateMachine`. */
export interface StateMachine<S extends string = string> {
  /** Names the machine in error messages (`'payment'`). */
  readonly name: string;
  /** Every declared state, in declaration order. */
  readonly states: readonly S[];
  /** True when `from` may move to `to` (both declared, and `to` listed for `from`). */
  allows(from: string, to: string): boolean;
  /** The states `from` may move to (empty for a terminal or unknown state). */
  next(from: string): readonly S[];
}

/**
 * Declares a state machine: `transitions` maps every state to the states it may move to; a terminal state maps
 * to `[]`. Every target must itself be declared, and names are 1-100 characters, else a `ConfigurationError`
 * (thrown at start-up, where the machine is declared). A state moving to itself is legal only when listed.
 *
 * @example
 * const payment = defineStateMachine('payment', {
 *   pending: ['authorized', 'failed'],
 *   authorized: ['captured', 'voided'],
 *   captured: ['refunded'],
 *   failed: [], voided: [], refunded: [],
 * });
 */
export function defineStateMachine<const T extends Readonly<Record<string, readonly (keyof T & string)[]>>>(
  name: string,
  transitions: T,
): StateMachine<keyof T & string> {
  type S = keyof T & string;
  if (typeof name !== 'string' || name.length === 0 || name.length > 100) {
    throw new ConfigurationError(
      `defineStateMachine: name must be 1-100 characters, got ${JSON.stringify(name)}`,
    );
  }
  if (typeof transitions !== 'object' || transitions === null) {
    throw new ConfigurationError(
      `defineStateMachine(${JSON.stringify(name)}): transitions must be an object state → next states`,
    );
  }
  const states = Object.keys(transitions) as S[];
  if (states.length === 0)
    throw new ConfigurationError(`defineStateMachine(${JSON.stringify(name)}): declare at least one state`);
  const edges = new Map<string, Set<S>>();
  for (const state of states) {
    if (state.length > 100)
      throw new ConfigurationError(
        `defineStateMachine(${JSON.stringify(name)}): state names are 1-100 characters, got ${JSON.stringify(state)}`,
      );
    const targets: unknown = transitions[state];
    if (!Array.isArray(targets)) {
      throw new ConfigurationError(
        `defineStateMachine(${JSON.stringify(name)}): ${JSON.stringify(state)} must map to an array of states ([] for a terminal state)`,
      );
    }
    for (const target of targets as unknown[]) {
      if (typeof target !== 'string' || !Object.hasOwn(transitions, target)) {
        throw new ConfigurationError(
          `defineStateMachine(${JSON.stringify(name)}): ${JSON.stringify(state)} moves to ${JSON.stringify(target)}, which is not a declared state (declared: ${states.join(', ')})`,
        );
      }
    }
    edges.set(state, new Set(targets as S[]));
  }
  return Object.freeze({
    name,
    states: Object.freeze([...states]),
    allows: (from: string, to: string) => edges.get(from)?.has(to as S) === true,
    next: (from: string) => [...(edges.get(from) ?? [])],
  });
}

/**
 * The `PermanentError` of a refused transition (code `ILLEGAL_TRANSITION`): the message names both states and
 * what the current one allows. `from` is the row's state (`null` when the column is NULL, or when `to` is not declared and the row was not read), `to` the target.
 * Catch it to ignore late events on purpose; uncaught, the consumer dead-letters the message.
 */
export class IllegalTransitionError extends PermanentError {
  readonly machine: string;
  readonly from: string | null;
  readonly to: string;

  constructor(message: string, transition: { machine: string; from: string | null; to: string }) {
    super(message, { code: 'ILLEGAL_TRANSITION' });
    this.machine = transition.machine;
    this.from = transition.from;
    this.to = transition.to;
  }
}

/** What `transitionState` changes. */
export interface TransitionStateOptions {
  /** The table of the row (`'payments'`, `'billing.payments'`). */
  readonly table: TableName;
  /** The row's key: column → value. Must be the columns of a primary key or unique constraint. */
  readonly key: Readonly<Record<string, unknown>>;
  /** The text column holding the state. */
  readonly column: string;
  /** The declared machine the state must follow. */
  readonly machine: StateMachine;
  /** The state to move to. */
  readonly to: string;
  /** Other columns to write with a legal transition: column → value. Default is none. */
  readonly values?: Readonly<Record<string, unknown>>;
  /** Where the illegal-transition counter goes. Default is the global provider of `@opentelemetry/api`. */
  readonly meterProvider?: MeterProvider;
}

/** What `transitionState` did. An illegal transition is not a result: it throws a `PermanentError`. */
export type TransitionStateResult =
  /** Legal: the row moved from `from` to the target, and `values` were written. */
  | { readonly applied: true; readonly from: string }
  /**
   * Nothing written. `already`: the row is in the target state already and the machine does not list that
   * state moving to itself — a redelivery of the same event, not an error. `missing`: no row with `key`.
   */
  | { readonly applied: false; readonly reason: 'already' | 'missing' };

/**
 * Moves the row of `key` to the state `to` only when `machine` allows it from the row's current state, on `tx`:
 * `SELECT state … FOR UPDATE`, then the `UPDATE`. The row lock makes the check and the write one step: concurrent
 * transitions of one row take turns, and each is checked against the state the previous one committed, so
 * exactly the legal ones apply whatever their order.
 *
 * An illegal transition (`authorized` after `captured`), a `to` the machine does not declare, or a row in a state
 * it does not declare throws a `PermanentError` naming both states and what the current one allows: the
 * consumer dead-letters the message (retrying cannot make it legal) and nothing is written. Counted in
 * `inboxkit.patterns.illegal_transitions` (by `table`). Run it on the handler's transaction, so that it commits
 * with the inbox record.
 *
 * @example
 * const result = await transitionState(context.tx, {
 *   table: 'payments',
 *   key: { payment_id: event.paymentId },
 *   column: 'status',
 *   machine: payment, // defineStateMachine('payment', { … })
 *   to: 'captured',
 *   values: { captured_at: new Date(event.at) },
 * });
 * if (!result.applied) logger.info({ eventId: event.id, reason: result.reason }, 'no transition');
 */
export async function transitionState(
  tx: SqlTransaction,
  options: TransitionStateOptions,
): Promise<TransitionStateResult> {
  const executor = sqlExecutorOf(tx);
  const { machine, to } = options;
  const keyColumns = Object.keys(options.key);
  if (keyColumns.length === 0) throw new TypeError('transitionState: key needs at least one column');
  const table = quoteTable(options.table);
  const state = quoteIdentifier(options.column);
  const where = keyColumns.map((c, i) => `${quoteIdentifier(c)} = $${i + 1}`).join(' AND ');
  const keyValues = keyColumns.map((c) => options.key[c]);
  const describeRow = `${tableLabel(options.table)}(${keyColumns.map((c) => `${c}=${String(options.key[c])}`).join(', ')})`;
  const illegal = (message: string, from: string | null): never => {
    patternCounter(
      PATTERN_METRIC_NAMES.illegalTransitions,
      'State transitions refused by a state machine',
      options.meterProvider,
    ).add(1, {
      table: tableLabel(options.table),
    });
    throw new IllegalTransitionError(message, { machine: machine.name, from, to });
  };
  if (!machine.states.includes(to)) {
    illegal(
      `${machine.name} ${describeRow}: cannot move to ${JSON.stringify(to)}, which is not a state of ${machine.name} (${machine.states.join(', ')})`,
      null,
    );
  }
  const rows = await executor.execute(
    `SELECT ${state}::text AS state FROM ${table} WHERE ${where} FOR UPDATE`,
    keyValues,
  );
  if (rows.length === 0) return { applied: false, reason: 'missing' };
  const from = rows[0]!['state'];
  if (typeof from !== 'string' || !machine.states.includes(from)) {
    return illegal(
      `${machine.name} ${describeRow}: the row holds ${JSON.stringify(from)}, which is not a state of ${machine.name}, so it cannot move to ${JSON.stringify(to)}`,
      typeof from === 'string' ? from : null,
    );
  }
  if (!machine.allows(from, to)) {
    if (from === to) return { applied: false, reason: 'already' };
    const allowed = machine.next(from);
    return illegal(
      `illegal ${machine.name} transition of ${describeRow}: from ${JSON.stringify(from)} to ${JSON.stringify(to)} (${JSON.stringify(from)} allows ${allowed.length === 0 ? 'nothing: it is terminal' : allowed.map((s) => JSON.stringify(s)).join(', ')})`,
      from,
    );
  }
  const values = options.values ?? {};
  const parameters: unknown[] = [...keyValues];
  const param = (value: unknown): string => `$${parameters.push(value)}`;
  const set = [
    `${state} = ${param(to)}`,
    ...Object.keys(values)
      .filter((c) => c !== options.column && !(c in options.key))
      .map((c) => `${quoteIdentifier(c)} = ${param(values[c])}`),
  ];
  await executor.execute(`UPDATE ${table} SET ${set.join(', ')} WHERE ${where}`, parameters);
  return { applied: true, from };
}
