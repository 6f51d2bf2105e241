// An intent: one operation the app asked for, with the Idempotency-Key minted when it was created. The record is
// what the storage keeps, so every retry, reload or sync after a crash sends the same key and the same bytes.

/** Where an intent is. `succeeded` and `failed` are final: a final intent is never sent again. */
export type IntentState = 'pending' | 'sending' | 'waiting-for-network' | 'succeeded' | 'failed';

/**
 * Why an intent failed for good:
 * - `rejected`: the server answered a 4xx other than 408/409/429 (its stored, final answer; see `response`);
 * - `key-reused`: 422 `Idempotency-Key reused`, the key was sent with another request: a client bug, never retried;
 * - `expired`: first sent longer ago than the server keeps keys (`retentionMs`), so a resend could no longer be
 *   recognised as a retry: surfaced instead of sent.
 */
export type IntentFailure = 'rejected' | 'key-reused' | 'expired';

/** What the app asks to send. The body is serialised once, when the intent is created. */
export interface IntentRequest {
  /** Default is POST. */
  readonly method?: string;
  readonly url: string;
  /** A string is sent as it is; anything else as JSON (with `content-type: application/json`). */
  readonly body?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * Collapses a repeated enqueue of the same logical operation (a double click): while an intent with this
   * dedupe key is stored (until it is pruned or removed), `enqueue` returns it instead of creating another;
   * across tabs too with a storage that implements `add` (IndexedDB does). Default is none.
   */
  readonly dedupeKey?: string;
  /** Intents are sent in order within a group; another group is not held up by this one's retries. Default is one group. */
  readonly group?: string;
}

/** The server's answer, kept with the intent. */
export interface IntentResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /** True when the server answered from its stored response (`Idempotent-Replayed: true`). */
  readonly replayed: boolean;
}

/** An intent as stored. Plain data (structured-clone and JSON safe), so any storage can keep it. */
export interface Intent {
  /** The Idempotency-Key, minted once (`crypto.randomUUID()`). */
  readonly key: string;
  /** Position in the queue. */
  readonly seq: number;
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly dedupeKey?: string;
  readonly group?: string;
  readonly state: IntentState;
  /** Epoch ms. */
  readonly createdAt: number;
  /** Epoch ms of the first attempt that may have reached the server: the start of the retention horizon. */
  readonly firstSentAt?: number;
  readonly attempts: number;
  /** Epoch ms before which the intent is not sent again (backoff, `Retry-After`). */
  readonly notBefore: number;
  readonly response?: IntentResponse;
  readonly failure?: IntentFailure;
  /**
   * Epoch ms when the app was first handed this intent's final record (a listener, `settled()`, `current()` or
   * `list()` got it): `keepFinishedMs` counts from here. Unset while the final answer is unread.
   */
  readonly readAt?: number;
  /** The last error or status seen (for display and logs). */
  readonly lastError?: string;
}

/** True for `succeeded` and `failed`. */
export const isFinal = (intent: Intent): boolean => intent.state === 'succeeded' || intent.state === 'failed';
