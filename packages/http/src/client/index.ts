// @inboxkit/http/client: the client's side of the Idempotency-Key contract: one key per intent, reused across
// retries, exponential backoff with jitter, retries only where they are safe.

export { idempotentFetch, isRetriableStatus, type IdempotentFetchOptions } from './idempotent-fetch.js';
export { retryDelayMs, type ClientBackoff } from './retry-delay.js';
