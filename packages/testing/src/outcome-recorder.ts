// Records every outcome a consumer reports through `hooks.onOutcome`, so tests await "message m1 was
// processed" instead of sleeping and hoping.

import type { Outcome, OutcomeEvent, OutcomeStatus } from '@inboxkit/core';

import { describeOutcome } from './describe-outcome.js';

/** One recorded outcome, with when it was reported. */
export interface RecordedOutcome extends OutcomeEvent {
  /** The message id the outcome is about (`outcome.messageId`, else the delivery's id). */
  readonly id: string | undefined;
  /** `Date.now()` when the hook was called. */
  readonly at: number;
  /** 0-based position among everything this recorder saw. */
  readonly index: number;
}

/** What `waitFor` accepts as "the outcome I am waiting for". */
export type OutcomeExpectation =
  OutcomeStatus | readonly OutcomeStatus[] | ((outcome: Outcome, event: RecordedOutcome) => boolean);

/** Options of `waitFor` and `waitForCount`. */
export interface WaitOptions {
  /** How long to wait before rejecting. Default is 10,000 ms. */
  readonly timeoutMs?: number;
}

/** Options of `waitForCount`. */
export interface WaitForCountOptions extends WaitOptions {
  /** Count only outcomes with this status (or these statuses). Default: every outcome. */
  readonly status?: OutcomeStatus | readonly OutcomeStatus[];
  /** Count only outcomes of this message id. Default: every id. */
  readonly id?: string;
}

interface Waiter {
  readonly check: () => boolean;
}

const DEFAULT_TIMEOUT_MS = 10_000;
const MAX_LISTED = 20;

/**
 * An `onOutcome` hook that remembers every outcome and lets a test await one. `waitFor` also matches outcomes
 * recorded before it was called, so there is no race between publishing and waiting.
 *
 * @example
 * const recorder = new OutcomeRecorder();
 * const consumer = idempotentConsumer({ name: 'orders', store, handler, hooks: { onOutcome: recorder.hook } });
 * await transport.send([{ id: 'o-1', body: '{"total":5}' }]);
 * await recorder.waitFor('o-1', 'processed');
 * expect(recorder.count('processed')).toBe(1);
 */
export class OutcomeRecorder {
  readonly #events: RecordedOutcome[] = [];
  readonly #waiters = new Set<Waiter>();

  /** The hook to pass as `hooks.onOutcome` (bound; never throws). */
  readonly hook = (event: OutcomeEvent): void => {
    this.onOutcome(event);
  };

  /** Records one outcome event. Same as `hook`, as a method. */
  onOutcome(event: OutcomeEvent): void {
    const id = event.outcome.messageId ?? event.message.id;
    this.#events.push({ ...event, id, at: Date.now(), index: this.#events.length });
    for (const waiter of [...this.#waiters]) waiter.check();
  }

  /** Every recorded event, oldest first. */
  get events(): readonly RecordedOutcome[] {
    return this.#events;
  }

  /** The outcomes of one message id (or of every message), oldest first. */
  outcomes(id?: string): Outcome[] {
    return this.#events.filter((e) => id === undefined || e.id === id).map((e) => e.outcome);
  }

  /** How many outcomes have this status (or any status), optionally for one message id. */
  count(status?: OutcomeStatus, id?: string): number {
    return this.#events.filter(
      (e) => (status === undefined || e.outcome.status === status) && (id === undefined || e.id === id),
    ).length;
  }

  /** Outcome counts by status. */
  counts(): Record<OutcomeStatus, number> {
    const counts: Record<OutcomeStatus, number> = { processed: 0, duplicate: 0, retry: 0, 'dead-letter': 0 };
    for (const e of this.#events) counts[e.outcome.status] += 1;
    return counts;
  }

  /** Forgets everything recorded so far. Pending waits keep waiting for new outcomes. */
  clear(): void {
    this.#events.length = 0;
  }

  /**
   * Resolves with the first outcome of message `id` that matches `expected` (a status, a list of statuses or a
   * predicate; default: any outcome), looking at what was already recorded first. Rejects after `timeoutMs`
   * with a message listing what was seen.
   *
   * @example
   * await recorder.waitFor('o-1', 'processed');
   * await recorder.waitFor('o-1', (o) => o.status === 'retry' && o.attempt === 2, { timeoutMs: 2_000 });
   */
  waitFor(
    id: string | undefined,
    expected?: OutcomeExpectation,
    options: WaitOptions = {},
  ): Promise<RecordedOutcome> {
    const matches = toPredicate(expected);
    const find = (): RecordedOutcome | undefined =>
      this.#events.find((e) => e.id === id && matches(e.outcome, e));
    return this.#wait(
      find,
      options.timeoutMs,
      () => {
        const what = describeExpectation(expected);
        return `OutcomeRecorder.waitFor: no ${what} outcome for message ${JSON.stringify(id)}`;
      },
      id,
    );
  }

  /**
   * Resolves once at least `n` outcomes (optionally only of `status` / of message `id`) were recorded, with
   * the first `n` of them.
   *
   * @example
   * await transport.send(messages);
   * await recorder.waitForCount(messages.length, { status: ['processed', 'duplicate'] });
   */
  waitForCount(n: number, options: WaitForCountOptions = {}): Promise<RecordedOutcome[]> {
    const statuses =
      options.status === undefined ? undefined : ([] as OutcomeStatus[]).concat(options.status);
    const selected = (): RecordedOutcome[] =>
      this.#events.filter(
        (e) =>
          (statuses === undefined || statuses.includes(e.outcome.status)) &&
          (options.id === undefined || e.id === options.id),
      );
    const find = (): RecordedOutcome[] | undefined => {
      const list = selected();
      return list.length >= n ? list.slice(0, n) : undefined;
    };
    return this.#wait(
      find,
      options.timeoutMs,
      () => {
        const filter = [
          statuses ? `status ${statuses.join('|')}` : '',
          options.id !== undefined ? `id ${JSON.stringify(options.id)}` : '',
        ]
          .filter(Boolean)
          .join(', ');
        return `OutcomeRecorder.waitForCount: expected ${n} outcomes${filter ? ` (${filter})` : ''}, saw ${selected().length}`;
      },
      options.id,
    );
  }

  /** A readable list of recorded outcomes (of one id, or all), for failure messages. */
  describe(id?: string): string {
    const list = this.#events.filter((e) => id === undefined || e.id === id);
    if (list.length === 0) return '  (nothing recorded)';
    const shown = list.slice(-MAX_LISTED).map((e) => `  #${e.index} ${describeOutcome(e)}`);
    if (list.length > MAX_LISTED) shown.unshift(`  … ${list.length - MAX_LISTED} earlier outcomes not shown`);
    return shown.join('\n');
  }

  #wait<T>(
    find: () => T | undefined,
    timeoutMs: number = DEFAULT_TIMEOUT_MS,
    explain: () => string,
    id?: string,
  ): Promise<T> {
    const found = find();
    if (found !== undefined) return Promise.resolve(found);
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter = {
        check: () => {
          const hit = find();
          if (hit === undefined) return false;
          this.#waiters.delete(waiter);
          clearTimeout(timer);
          resolve(hit);
          return true;
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(waiter);
        const seenForId =
          id === undefined ? '' : `\nOutcomes of ${JSON.stringify(id)}:\n${this.describe(id)}`;
        reject(
          new Error(
            `${explain()} within ${timeoutMs} ms.${seenForId}\nAll outcomes (${this.#events.length}):\n${this.describe()}`,
          ),
        );
      }, timeoutMs);
      this.#waiters.add(waiter);
    });
  }
}

function toPredicate(
  expected: OutcomeExpectation | undefined,
): (outcome: Outcome, event: RecordedOutcome) => boolean {
  if (expected === undefined) return () => true;
  if (typeof expected === 'function') return expected;
  const statuses = ([] as OutcomeStatus[]).concat(expected as OutcomeStatus | OutcomeStatus[]);
  return (outcome) => statuses.includes(outcome.status);
}

function describeExpectation(expected: OutcomeExpectation | undefined): string {
  if (expected === undefined) return 'recorded';
  if (typeof expected === 'function') return 'matching';
  return ([] as OutcomeStatus[]).concat(expected as OutcomeStatus | OutcomeStatus[]).join('|');
}
