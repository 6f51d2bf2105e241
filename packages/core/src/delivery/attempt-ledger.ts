// The inbox's record of attempts for the delivery kit: "an attempt of these messages is starting" and "which
// of these redelivered messages may have been running when a process died". Only a transport's attempt charger
// needs them, so they are not on `IdempotentConsumer`: an idempotent consumer carries its ledger under a
// non-enumerable symbol key, which `attemptLedgerOf` reads and a wrapper of a consumer forwards with
// `withAttemptLedger`.

import type { InboundMessage } from '../message.js';

/** Shared across duplicate installs of core, as the error brand is (`Symbol.for`). */
const LEDGER = Symbol.for('@inboxkit/core.attemptLedger');

/** What the delivery kit's `AttemptCharger` records and reads through an idempotent consumer. */
export interface AttemptLedger {
  /**
   * Records, in one statement, that an attempt of each message is starting, so a message that kills the process
   * on every attempt still reaches the DLQ after `maxAttempts`. Call just before the messages run. Never rejects.
   */
  recordAttemptsStarted(messages: readonly InboundMessage[]): Promise<void>;
  /**
   * Which of these redelivered messages may have been running when a process died (one read of their rows):
   * an id with no inbox row yet, or whose last started attempt has no recorded end. Resolves to each suspect's
   * id and the attempts it has used (`max(attempts, startedAttempts)`, 0 with no row); when the store cannot be
   * read, every message with a valid id is a suspect, with 0. Never rejects.
   *
   * Optional: a ledger without it makes every redelivery a suspect (safe, and slower after retries).
   */
  crashSuspects?(messages: readonly InboundMessage[]): Promise<ReadonlyMap<string, number>>;
}

/**
 * The attempt ledger `consumer` carries (every `idempotentConsumer(...)` does), or `undefined`.
 *
 * @example
 * const ledger = attemptLedgerOf(consumer);
 * await ledger?.recordAttemptsStarted([message]);
 */
export function attemptLedgerOf(consumer: unknown): AttemptLedger | undefined {
  if ((typeof consumer !== 'object' && typeof consumer !== 'function') || consumer === null) return undefined;
  const ledger = (consumer as { readonly [LEDGER]?: unknown })[LEDGER];
  return typeof (ledger as AttemptLedger | undefined)?.recordAttemptsStarted === 'function'
    ? (ledger as AttemptLedger)
    : undefined;
}

/**
 * Gives `target` the attempt ledger `ledger` (non-enumerable, so it stays out of spreads, JSON and logs) and
 * returns it. For an object that wraps an idempotent consumer (a decorator, a fault injector) and is handed to a
 * transport: forward the inner consumer's ledger, and crashes are charged as without the wrapper.
 *
 * @example
 * const traced = withAttemptLedger(
 *   { name: inner.name, config: inner.config, handle: traceHandle, handleBatch: traceBatch },
 *   attemptLedgerOf(inner)!,
 * );
 */
export function withAttemptLedger<T extends object>(target: T, ledger: AttemptLedger): T {
  Object.defineProperty(target, LEDGER, { value: ledger, enumerable: false, configurable: true });
  return target;
}
