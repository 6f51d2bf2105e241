// Background Sync, where the browser has it (Chromium): a queue waiting for the network asks the service worker
// to be woken when the network returns, and the service worker flushes the same queue (same storage, same lock),
// so an intent created offline is sent even if every tab has been closed since.

import { isFinal } from './intent.js';
import type { IntentQueue } from './intent-queue.js';

interface SyncRegistration {
  sync?: { register(tag: string): Promise<void> };
}
interface SyncEvent extends Event {
  readonly tag: string;
  waitUntil(work: Promise<unknown>): void;
}

/**
 * A page-side `onWaitingForNetwork` for `createIntentQueue`: registers the sync `tag` with the service worker.
 * Does nothing where there is no service worker or no Background Sync. Default tag is `inboxkit`.
 *
 * @example
 * createIntentQueue({ onWaitingForNetwork: requestBackgroundSync() });
 */
export function requestBackgroundSync(tag = 'inboxkit'): () => void {
  return () =>
    void (typeof navigator === 'undefined' ? undefined : navigator.serviceWorker)?.ready
      .then((registration) => (registration as SyncRegistration).sync?.register(tag))
      .catch(() => undefined);
}

/**
 * Service-worker side: on the sync event `tag`, flushes `queue`; if intents remain unsent the event fails, so the
 * browser schedules another sync. Default tag is `inboxkit`.
 *
 * @example
 * // sw.js
 * handleBackgroundSync(self, createIntentQueue());
 */
export function handleBackgroundSync(scope: EventTarget, queue: IntentQueue, tag = 'inboxkit'): void {
  scope.addEventListener('sync', (event) => {
    const sync = event as SyncEvent;
    if (sync.tag !== tag) return;
    sync.waitUntil(
      queue.flush().then(async () => {
        if ((await queue.list()).some((intent) => !isFinal(intent))) throw new Error('intents left to send');
      }),
    );
  });
}
