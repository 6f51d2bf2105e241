// Background Sync's service-worker side: the sync event with the queue's tag flushes the queue, and fails while
// intents remain unsent so that the browser schedules another sync; other tags are left alone.

import { afterEach, describe, expect, it } from 'vitest';
import {
  createIntentQueue,
  handleBackgroundSync,
  memoryStorage,
  requestBackgroundSync,
  type IntentQueue,
} from '../src/index.js';
import { fakeServer, json, type Answer } from './support/fake-server.js';

const queues: IntentQueue[] = [];
afterEach(() => queues.splice(0).forEach((q) => q.close()));

/** A service worker's sync event: `waitUntil` keeps the promise the handler gives it. */
function syncEvent(
  tag: string,
): Event & { tag: string; waitUntil(p: Promise<unknown>): void; work?: Promise<unknown> } {
  const event = Object.assign(new Event('sync'), {
    tag,
    work: undefined as Promise<unknown> | undefined,
    waitUntil(p: Promise<unknown>) {
      event.work = p;
    },
  });
  return event;
}

async function swWithQueue(...answers: Answer[]) {
  const server = fakeServer(...answers);
  const storage = memoryStorage();
  // The page stored an intent while offline; the service worker's queue shares the storage.
  const page = createIntentQueue({ storage, fetch: server.fetch, locks: null, isOffline: () => true });
  const sw = createIntentQueue({ storage, fetch: server.fetch, locks: null, autoStart: false });
  queues.push(page, sw);
  const intent = await page.enqueue({ url: '/orders', body: 'offline order' });
  const scope = new EventTarget();
  handleBackgroundSync(scope, sw, 'orders');
  return { server, scope, intent, sw };
}

describe('handleBackgroundSync', () => {
  it('sends what the page left on the sync event with its tag', async () => {
    const { server, scope, intent } = await swWithQueue(json(201, {}));
    const other = syncEvent('something-else');
    scope.dispatchEvent(other);
    expect(other.work).toBeUndefined();
    const event = syncEvent('orders');
    scope.dispatchEvent(event);
    await event.work;
    expect(server.sent.map((r) => [r.key, r.body])).toEqual([[intent.key, 'offline order']]);
  });

  it('fails the sync event while an intent is left unsent, so the browser tries again', async () => {
    const { scope } = await swWithQueue(json(503, {}));
    const event = syncEvent('orders');
    scope.dispatchEvent(event);
    await expect(event.work).rejects.toThrow('intents left to send');
  });

  it('requestBackgroundSync does nothing where there is no service worker', () => {
    expect(() => requestBackgroundSync('orders')()).not.toThrow();
  });
});
