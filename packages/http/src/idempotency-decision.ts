// What `begin` decides for a request, as a discriminated union: run the handler (`proceed`, `unkeyed`) or
// answer at once with a ready response (replay, 409, 422, 400).

import type { Transaction } from 'kysely';
import type { HttpResponse, IdempotentResponseInit } from './http-response.js';

/** The handler may run: the key is claimed with a lease. Settle it exactly once. */
export interface ProceedDecision<DB, Tx = Transaction<DB>> {
  readonly kind: 'proceed';
  readonly key: string;
  /** 1 for the first execution, more after releases or lease takeovers. */
  readonly attempt: number;
  /** Whether the key has been completed or released already. */
  readonly settled: boolean;
  /** Results of the phases completed by earlier attempts of this key, by name. */
  readonly recoveryPoints: Readonly<Record<string, unknown>>;
  /**
   * A recovery point (Brandur's atomic phase): runs `fn` in a transaction that also records its result (JSON)
   * under `name` and extends the lease. When an earlier attempt of this key completed the phase, `fn` does not
   * run and its recorded result is returned, so a retry after a release or a takeover resumes after the last
   * completed phase. Rejects with `LeaseLostError` (rolled back) when another request took the key over.
   */
  phase<T>(name: string, fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * Runs `fn` in a transaction and stores the response it returns in the same transaction, fenced by the
   * lease: business writes and the stored response commit together or not at all. A response that is not
   * stored (5xx by default) rolls the transaction back and releases the key; a thrown error does the same and
   * is rethrown. Rejects with `ResponseTooLargeError`, `LeaseLostError`, `InvalidResponseError` (a header or
   * status Node cannot send) or `ResponseAlreadySentError` (`request.responseStarted()`): all roll back and
   * release the key.
   */
  transaction(fn: (tx: Tx) => Promise<IdempotentResponseInit>): Promise<HttpResponse>;
  /**
   * Stores the response in a statement of its own (fenced by the lease), or releases the key for a 5xx. Rejects
   * as `transaction` does, after releasing the key.
   */
  complete(response: IdempotentResponseInit): Promise<HttpResponse>;
  /** Gives the key back so a retry runs again. */
  release(): Promise<void>;
}

/** No key, and none required here: run the handler without idempotency. */
export interface UnkeyedDecision {
  readonly kind: 'unkeyed';
}

/** Answer with `response` without running the handler. */
export interface AnsweredDecision {
  /**
   * `replay`: the stored response, with `Idempotent-Replayed: true`. `conflict`: 409, the first request is in
   * flight (`Retry-After`). `mismatch`: 422, same key with another method, route or body. `missing`: 400, a
   * key is required. `invalid`: 400, the key is not 1–255 printable characters. `no-principal`: 400, the
   * `principal` function gave an empty, blank or invisible string, `undefined` or `null` for a keyed request
   * (one scope for all such callers would serve one the response of another); nothing was claimed.
   * `resolver-failed`: 500, the `key` or `fingerprint` function threw (or answered what cannot be used); nothing
   * was claimed.
   */
  readonly kind: 'replay' | 'conflict' | 'mismatch' | 'missing' | 'invalid' | 'no-principal' | 'resolver-failed';
  readonly response: HttpResponse;
  /** The request's Idempotency-Key on a replay, 409 or 422; absent when there is no valid key (400). */
  readonly key?: string;
  /** `'fast-path'` on a replay answered from the fast path (`fastPath`) without Postgres; absent otherwise. */
  readonly source?: 'fast-path';
}

/** The result of `begin`. */
export type IdempotencyDecision<DB, Tx = Transaction<DB>> =
  ProceedDecision<DB, Tx> | UnkeyedDecision | AnsweredDecision;
