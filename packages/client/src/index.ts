// @inboxkit/client: the client half of Idempotency-Key. An intent queue for browsers and apps that mints one key
// per intent, stores it before sending, and reuses it on every retry, reload and offline sync.

export {
  createIntentQueue,
  type IntentHandle,
  type IntentQueue,
  type IntentQueueOptions,
} from './intent-queue.js';
export {
  isFinal,
  type Intent,
  type IntentFailure,
  type IntentRequest,
  type IntentResponse,
  type IntentState,
} from './intent.js';
export { memoryStorage, type IntentStorage } from './intent-storage.js';
export { indexedDbStorage } from './indexeddb-storage.js';
export { backoffDelayMs, retryAfterMs, verdictOf, type Backoff, type Verdict } from './retry-policy.js';
export type { LockManagerLike } from './sender-lock.js';
export { handleBackgroundSync, requestBackgroundSync } from './background-sync.js';
