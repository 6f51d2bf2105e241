// The queue's policies with an in-memory storage, a fake fetch and a clock the test moves: key per intent,
// persisted before sending, retries with the same key and bytes, Retry-After, replay as success, 422 and other
// 4xx final, order per queue and per group, dedupe key (atomic across queues), offline, retention horizon,
// pruning of read final intents, one sender across queues
// sharing a storage (Web Locks and the lease fallback), resume after a reload.

import { afterEach, describe, expect, it } from 'vitest';
import {
  backoffDelayMs,
  createIntentQueue,
  memoryStorage,
  type Intent,
  type IntentQueue,
  type IntentQueueOptions,
  type IntentStorage,
  type LockManagerLike,
} from '../src/index.js';
import { eventually } from '../../../test/support/eventually.js';
import { fakeClock, fakeServer, json, type Answer } from './support/fake-server.js';

const queues: IntentQueue[] = [];
afterEach(() => queues.splice(0).forEach((q) => q.close()));

function queue(answers: Answer[], options: IntentQueueOptions = {}) {
  const server = fakeServer(...answers);
  const clock = fakeClock();
  const storage = options.storage ?? memoryStorage();
  const q = createIntentQueue({
    storage,
    fetch: server.fetch,
    now: clock.now,
    locks: null,
    random: () => 0.5,
    ...options,
  });
  queues.push(q);
  return { q, server, clock, storage };
}

/** Moves the clock past every intent's next attempt and sends what is due, until all are final or `rounds` ran. */
async function retryUntilFinal(
  q: IntentQueue,
  clock: { advance(ms: number): void },
  rounds = 10,
): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    await q.flush();
    const open = (await q.list()).filter((x) => x.state !== 'succeeded' && x.state !== 'failed');
    if (open.length === 0) return;
    clock.advance(120_000); // past any backoff (cap 60 s) and Retry-After used here
  }
}

describe('createIntentQueue', () => {
  it('stores the intent with its key before the first send, and sends that key', async () => {
    const storage = memoryStorage();
    let storedWhenSent: Intent[] = [];
    const { q, server } = queue(
      [
        async () => {
          storedWhenSent = await storage.list();
          return json(201, { id: 1 });
        },
      ],
      { storage },
    );
    const handle = await q.enqueue({ url: '/orders', body: { cart: 1 } });
    const done = await handle.settled();
    expect(storedWhenSent).toHaveLength(1);
    expect(storedWhenSent[0]).toMatchObject({ key: handle.key, state: 'sending', body: '{"cart":1}' });
    expect(server.sent[0]).toMatchObject({ key: handle.key, method: 'POST', body: '{"cart":1}' });
    expect(server.sent[0]!.headers.get('content-type')).toBe('application/json');
    expect(done).toMatchObject({
      state: 'succeeded',
      response: { status: 201, body: '{"id":1}', replayed: false },
    });
  });

  it('retries 5xx and network errors with the same key and the same bytes until the answer', async () => {
    const { q, server, clock } = queue([
      json(500, {}),
      new TypeError('fetch failed'),
      json(503, {}),
      json(201, {}),
    ]);
    const handle = await q.enqueue({ url: '/orders', body: 'exact bytes' });
    await retryUntilFinal(q, clock);
    expect(handle.current()).toMatchObject({ state: 'succeeded', attempts: 4 });
    expect(server.sent.map((r) => [r.key, r.body])).toEqual(Array(4).fill([handle.key, 'exact bytes']));
  });

  it('waits Retry-After on 409, 429 and 503 and the full-jitter backoff otherwise', async () => {
    for (const status of [409, 429, 503]) {
      const { q, clock } = queue([json(status, {}, { 'retry-after': '7' })]);
      const handle = await q.enqueue({ url: '/orders' });
      await q.flush();
      expect(handle.current()).toMatchObject({
        state: 'pending',
        notBefore: clock.now() + 7000,
        lastError: `HTTP ${status}`,
      });
    }
    const { q, clock } = queue([json(502, {})], { baseDelayMs: 1000 });
    const handle = await q.enqueue({ url: '/orders' });
    await q.flush();
    expect(handle.current()!.notBefore).toBe(clock.now() + 500); // random 0.5 of the 1,000 ms cap
  });

  it('draws the backoff uniformly under a cap that doubles up to maxDelayMs', () => {
    expect(backoffDelayMs(1, { baseDelayMs: 100 }, () => 0)).toBe(0);
    expect(backoffDelayMs(1, { baseDelayMs: 100 }, () => 0.999)).toBe(99);
    expect(backoffDelayMs(4, { baseDelayMs: 100 }, () => 0.5)).toBe(400);
    expect(backoffDelayMs(30, { baseDelayMs: 100, maxDelayMs: 5000 }, () => 0.5)).toBe(2500);
  });

  it('takes a replayed response as success', async () => {
    const { q } = queue([json(201, { id: 7 }, { 'idempotent-replayed': 'true' })]);
    const done = await (await q.enqueue({ url: '/orders' })).settled();
    expect(done).toMatchObject({ state: 'succeeded', response: { status: 201, replayed: true } });
  });

  it('fails a 422 Idempotency-Key reused as key-reused and never sends it again', async () => {
    const reused = json(
      422,
      { title: 'Idempotency-Key reused' },
      { 'content-type': 'application/problem+json' },
    );
    const { q, server, clock } = queue([reused]);
    const handle = await q.enqueue({ url: '/orders' });
    expect(await handle.settled()).toMatchObject({
      state: 'failed',
      failure: 'key-reused',
      response: { status: 422 },
    });
    clock.advance(3_600_000);
    await q.flush();
    expect(server.sendsOf(handle.key)).toBe(1);
  });

  it("keeps a handler's 4xx as the final answer: rejected, with its response, not retried", async () => {
    for (const status of [400, 404, 422]) {
      const { q, server, clock } = queue([json(status, { error: 'amount must be positive' })]);
      const handle = await q.enqueue({ url: '/orders' });
      expect(await handle.settled()).toMatchObject({
        state: 'failed',
        failure: 'rejected',
        response: { status, body: '{"error":"amount must be positive"}' },
      });
      clock.advance(3_600_000);
      await q.flush();
      expect(server.sendsOf(handle.key)).toBe(1);
    }
  });

  it('sends in order: the second intent waits while the first is retried; another group does not', async () => {
    const { q, server, clock } = queue([
      (r) => (r.body === 'first' && server.sendsOf(r.key!) === 1 ? json(503, {}) : json(201, {})),
    ]);
    const first = await q.enqueue({ url: '/a', body: 'first' });
    const second = await q.enqueue({ url: '/a', body: 'second' });
    const other = await q.enqueue({ url: '/b', body: 'other', group: 'b' });
    await q.flush();
    expect(first.current()!.state).toBe('pending');
    expect(second.current()!.state).toBe('pending');
    expect(other.current()!.state).toBe('succeeded');
    expect(server.sendsOf(second.key)).toBe(0);
    await retryUntilFinal(q, clock);
    expect(server.sent.map((r) => r.body)).toEqual(['first', 'other', 'first', 'second']);
  });

  it('collapses two enqueues with one dedupe key in the same tick into one intent and one send', async () => {
    const { q, server } = queue([json(201, {})]);
    const [a, b] = await Promise.all([
      q.enqueue({ url: '/orders', body: { cart: 9 }, dedupeKey: 'cart-9' }),
      q.enqueue({ url: '/orders', body: { cart: 9 }, dedupeKey: 'cart-9' }),
    ]);
    await a.settled();
    expect(b.key).toBe(a.key);
    expect(await q.list()).toHaveLength(1);
    expect(server.sent).toHaveLength(1);
  });

  it('holds intents while offline (waiting-for-network) and sends them in order once online', async () => {
    let offline = true;
    const { q, server } = queue([json(201, {})], { isOffline: () => offline });
    const handles = [];
    for (const n of [1, 2, 3]) handles.push(await q.enqueue({ url: '/orders', body: `op ${n}` }));
    await q.flush();
    expect(server.sent).toHaveLength(0);
    expect(handles[0]!.current()!.state).toBe('waiting-for-network');
    offline = false;
    await q.flush();
    expect(server.sent.map((r) => r.body)).toEqual(['op 1', 'op 2', 'op 3']);
    expect(handles.map((h) => h.current()!.state)).toEqual(['succeeded', 'succeeded', 'succeeded']);
  });

  it('surfaces an intent first sent longer ago than the retention as expired, without sending it again', async () => {
    const { q, server, clock } = queue([json(503, {}, { 'retry-after': '60' })], { retentionMs: 3_600_000 });
    const handle = await q.enqueue({ url: '/orders' });
    await q.flush();
    clock.advance(3_600_001);
    await q.flush();
    expect(handle.current()).toMatchObject({ state: 'failed', failure: 'expired' });
    expect(server.sendsOf(handle.key)).toBe(1);
  });

  it('prunes a final intent keepFinishedMs after the app read its answer, never one whose answer is unread', async () => {
    const { q, clock, storage } = queue([json(201, {}), json(201, {}), json(201, {})], {
      keepFinishedMs: 60_000,
    });
    const stored = async (key: string) => (await storage.list()).find((i) => i.key === key);
    const read = await q.enqueue({ url: '/orders', dedupeKey: 'cart-1' });
    expect((await read.settled()).state).toBe('succeeded');
    await eventually(async () => (await stored(read.key))?.readAt === clock.now());
    // Sent and final while nothing of the app looked at it (a service worker sending with no tab open).
    const unread = await q.enqueue({ url: '/orders' });
    await q.flush();
    expect(await stored(unread.key)).toMatchObject({ state: 'succeeded' });
    expect((await stored(unread.key))?.readAt).toBeUndefined();

    clock.advance(60_000);
    await q.flush();
    expect(await stored(read.key)).toBeDefined(); // not yet: exactly keepFinishedMs after it was read
    clock.advance(1);
    await q.flush();
    expect(await stored(read.key)).toBeUndefined();
    expect(await stored(unread.key)).toMatchObject({ state: 'succeeded' });
    // Its dedupe key is free again: a new intent, a new key.
    const again = await q.enqueue({ url: '/orders', dedupeKey: 'cart-1' });
    expect(again.key).not.toBe(read.key);

    // The app reads the unread one at last (after a reload, say): it is kept keepFinishedMs from then.
    expect((await q.handle(unread.key).settled()).state).toBe('succeeded');
    await eventually(async () => (await stored(unread.key))?.readAt === clock.now());
    clock.advance(60_001);
    await q.flush();
    expect(await stored(unread.key)).toBeUndefined();
  });

  it('rejects bad input and bad options with a TypeError and stores nothing', async () => {
    const { q } = queue([json(201, {})]);
    await expect(q.enqueue({ url: '' })).rejects.toThrow(TypeError);
    await expect(q.enqueue({ url: '/x', body: { n: 1n } })).rejects.toThrow(TypeError);
    await expect(q.enqueue(undefined as never)).rejects.toThrow(TypeError);
    expect(await q.list()).toEqual([]);
    expect(() => createIntentQueue()).toThrow(/pass options.storage/);
    expect(() => createIntentQueue({ storage: memoryStorage(), retentionMs: 0 })).toThrow(
      /retentionMs must be a positive/,
    );
    expect(() => createIntentQueue({ storage: memoryStorage(), baseDelayMs: -1 })).toThrow(TypeError);
    expect(() => createIntentQueue({ storage: memoryStorage(), keepFinishedMs: 0 })).toThrow(
      /keepFinishedMs must be a positive/,
    );
  });
});

describe('one sender at a time, and resuming', () => {
  /** A fetch that holds every request until `release()`, counting sends per key. */
  function heldServer() {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const server = fakeServer(async () => {
      await gate;
      return json(201, {});
    });
    return { server, release };
  }

  async function twoQueues(storage: IntentStorage, locks: LockManagerLike | null) {
    const { server, release } = heldServer();
    const clock = fakeClock();
    const make = () => createIntentQueue({ storage, fetch: server.fetch, now: clock.now, locks });
    const a = make();
    const b = make();
    queues.push(a, b);
    const one = await a.enqueue({ url: '/orders', body: 'one' });
    const two = await b.enqueue({ url: '/orders', body: 'two' });
    await Promise.all([a.flush(), b.flush(), new Promise((r) => setTimeout(r, 0)).then(release)]);
    await Promise.all([a.flush(), b.flush()]);
    expect(server.sent.map((r) => r.body)).toEqual(['one', 'two']);
    expect([server.sendsOf(one.key), server.sendsOf(two.key)]).toEqual([1, 1]);
  }

  it('two queues on one storage enqueueing one dedupe key at the same instant store one intent', async () => {
    const storage = memoryStorage();
    const { server } = heldServer();
    const make = () => createIntentQueue({ storage, fetch: server.fetch, locks: null, autoStart: false });
    const [a, b] = [make(), make()];
    queues.push(a, b);
    const [x, y] = await Promise.all([
      a.enqueue({ url: '/orders', dedupeKey: 'cart-1' }),
      b.enqueue({ url: '/orders', dedupeKey: 'cart-1' }),
    ]);
    expect(y.key).toBe(x.key);
    expect((await storage.list()).map((i) => i.key)).toEqual([x.key]);
  });

  it('without IntentStorage.add, a dedupe key still collapses repeats within one queue', async () => {
    const full = memoryStorage();
    const storage: IntentStorage = {
      list: () => full.list(),
      put: (intent) => full.put(intent),
      delete: (key) => full.delete(key),
    };
    const { q } = queue([json(201, {})], { storage });
    const [x, y] = await Promise.all([
      q.enqueue({ url: '/orders', dedupeKey: 'cart-1' }),
      q.enqueue({ url: '/orders', dedupeKey: 'cart-1' }),
    ]);
    expect(y.key).toBe(x.key);
    expect(await storage.list()).toHaveLength(1);
  });

  it('two queues on one storage send each intent once, through the storage lease', async () => {
    await twoQueues(memoryStorage(), null);
  });

  it('two queues on one storage send each intent once, through Web Locks', async () => {
    let tail = Promise.resolve();
    const locks: LockManagerLike = {
      request(_name, callback) {
        const run = tail.then(callback);
        tail = run.catch(() => undefined);
        return run;
      },
    };
    await twoQueues(memoryStorage(), locks);
  });

  it('another tab retries an intent once the tab that sent it first is closed', async () => {
    const server = fakeServer(json(503, {}, { 'retry-after': '0.05' }), json(201, {}));
    const storage = memoryStorage();
    let tail = Promise.resolve();
    const locks: LockManagerLike = {
      request(_name, callback) {
        const run = tail.then(callback);
        tail = run.catch(() => undefined);
        return run;
      },
    };
    const name = `tabs-${Math.random()}`;
    // The other tab had nothing to send when it opened (autoStart off: it does not look at the storage itself).
    const [first, other] = [true, false].map((autoStart) =>
      createIntentQueue({ name, storage, fetch: server.fetch, locks, autoStart }),
    );
    queues.push(first!, other!);
    const handle = await first!.enqueue({ url: '/orders' });
    await first!.flush();
    expect(server.sent).toHaveLength(1);
    first!.close();
    // The other queue heard of the intent (BroadcastChannel) and wakes for its next attempt on its own.
    await eventually(async () => server.sent.length === 2, 60_000);
    expect(server.sent.map((r) => r.key)).toEqual([handle.key, handle.key]);
    expect((await other!.handle(handle.key).settled()).state).toBe('succeeded');
  });

  it('resumes an intent a reload interrupted mid-request with the same key', async () => {
    const storage = memoryStorage();
    const interrupted: Intent = {
      key: 'key-from-before-the-reload',
      seq: 1,
      method: 'POST',
      url: '/orders',
      headers: {},
      body: 'x',
      state: 'sending',
      createdAt: 1,
      firstSentAt: fakeClock().now() - 1000,
      attempts: 1,
      notBefore: 0,
    };
    await storage.put(interrupted);
    const { q, server } = queue([json(201, {}, { 'idempotent-replayed': 'true' })], { storage });
    const done = await q.handle(interrupted.key).settled();
    expect(done).toMatchObject({ state: 'succeeded', attempts: 2, response: { replayed: true } });
    expect(server.sent.map((r) => r.key)).toEqual([interrupted.key]);
  });
});
