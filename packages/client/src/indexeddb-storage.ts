// IndexedDB storage, the browser default: intents survive a reload, a crash and a closed tab, and every tab and
// the service worker of the origin share them. The lease is one readwrite transaction, which IndexedDB runs
// alone across contexts, so it is atomic; so is `add`, the dedupe check and the insert in one transaction.

import type { Intent } from './intent.js';
import type { IntentStorage } from './intent-storage.js';

const promised = <T>(request: IDBRequest<T> | IDBTransaction): Promise<T> =>
  new Promise((resolve, reject) => {
    if ('oncomplete' in request) request.oncomplete = () => resolve(undefined as T);
    else request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });

/**
 * Intents in the IndexedDB database `name` (object stores `intents` and `leases`), opened on first use.
 * Default name is `inboxkit-intents`.
 *
 * @example
 * const queue = createIntentQueue({ storage: indexedDbStorage('checkout-intents') });
 */
export function indexedDbStorage(name = 'inboxkit-intents'): IntentStorage {
  let opened: Promise<IDBDatabase> | undefined;
  const store = async (which: string, mode: IDBTransactionMode = 'readonly') => {
    opened ??= (() => {
      const request = indexedDB.open(name, 1);
      request.onupgradeneeded = () => {
        request.result.createObjectStore('intents', { keyPath: 'key' });
        request.result.createObjectStore('leases');
      };
      return promised(request);
    })();
    return (await opened).transaction(which, mode).objectStore(which);
  };
  const write = async (change: (s: IDBObjectStore) => unknown) => {
    const s = await store('intents', 'readwrite');
    change(s);
    await promised(s.transaction);
  };
  return {
    list: async () => promised((await store('intents')).getAll() as IDBRequest<Intent[]>),
    put: (intent) => write((s) => s.put(intent)),
    delete: (key) => write((s) => s.delete(key)),
    async add(intent) {
      const s = await store('intents', 'readwrite');
      const all = await promised(s.getAll() as IDBRequest<Intent[]>);
      const same = all.find((i) => i.dedupeKey === intent.dedupeKey);
      if (!same) s.put(intent);
      await promised(s.transaction);
      return same ?? intent;
    },
    async lease(leaseName, owner, untilMs, nowMs) {
      const s = await store('leases', 'readwrite');
      const held = (await promised(s.get(leaseName))) as { owner: string; until: number } | undefined;
      const granted = !held || held.owner === owner || held.until < nowMs;
      if (granted) s.put({ owner, until: untilMs }, leaseName);
      await promised(s.transaction);
      return granted;
    },
  };
}
