// The intent queue: the key is minted when the app creates the intent, the intent is stored before anything is
// sent, and one sender at a time (per origin) sends the stored intents in order, retrying with the same key
// until the server gives a final answer, and surfacing, never resending, what the server can no longer
// recognise as a retry.

import { indexedDbStorage } from './indexeddb-storage.js';
import { isFinal, type Intent, type IntentRequest } from './intent.js';
import type { IntentStorage } from './intent-storage.js';
import { backoffDelayMs, retryAfterMs, verdictOf, type Backoff, type Verdict } from './retry-policy.js';
import { leaseMs, withSenderLock, type LockManagerLike } from './sender-lock.js';

/** Options of `createIntentQueue`. */
export interface IntentQueueOptions extends Backoff {
  /** Names the queue: its sender lock and its cross-tab channel. Default is `inboxkit`. */
  readonly name?: string;
  /** Where intents are kept. Default is `indexedDbStorage()` where IndexedDB exists; elsewhere it is required. */
  readonly storage?: IntentStorage;
  /**
   * How long the server keeps a key (its `retentionMs`). An intent first sent longer ago than this is failed as
   * `expired` instead of being sent again. Default is 24 h, the server's default; set it to the server's value.
   */
  readonly retentionMs?: number;
  /**
   * How long a final intent stays stored after the app was handed its final answer (see `Intent.readAt`); then the
   * sender deletes it (on start and on every flush), and its dedupe key is free again. An intent whose final
   * answer no listener, `settled()`, `current()` or `list()` has returned yet is never deleted. Default is 7 days.
   */
  readonly keepFinishedMs?: number;
  /** The fetch used to send. Default is the global fetch. */
  readonly fetch?: typeof fetch;
  /** The sender lock. Default is `navigator.locks` where it exists; `null` uses the storage's lease. */
  readonly locks?: LockManagerLike | null;
  /**
   * Whether the runtime is offline now. Default reads `navigator.onLine` (and the queue flushes on the window's
   * `online`/`offline` events); with your own, call `flush()` when it changes.
   */
  readonly isOffline?: () => boolean;
  /** Called when an intent waits for the network (e.g. `requestBackgroundSync()`). Default is none. */
  readonly onWaitingForNetwork?: () => void;
  /** The clock, epoch ms. Default is Date.now. */
  readonly now?: () => number;
  /** Jitter source in [0, 1). Default is Math.random. */
  readonly random?: () => number;
  /** Whether the queue starts sending what is stored at once (a reload resumes). Default is true. */
  readonly autoStart?: boolean;
}

/** One intent, watched. */
export interface IntentHandle {
  readonly key: string;
  /** The latest known record (undefined once removed). */
  current(): Intent | undefined;
  /** Calls `listener` on every change of this intent; returns the unsubscribe function. */
  subscribe(listener: (intent: Intent) => void): () => void;
  /** Resolves with the intent once it is final (`succeeded` or `failed`). */
  settled(): Promise<Intent>;
}

/** The queue. */
export interface IntentQueue {
  /**
   * Mints the Idempotency-Key, stores the intent, then starts sending; resolves once it is stored. With a
   * `dedupeKey` already stored, returns that intent's handle and stores nothing. Throws TypeError on bad input.
   */
  enqueue(request: IntentRequest): Promise<IntentHandle>;
  /** The handle of a stored intent, e.g. after a reload. */
  handle(key: string): IntentHandle;
  /** Every stored intent, in queue order. */
  list(): Promise<Intent[]>;
  /** Sends every due intent now; resolves when nothing more is due (or the network is gone). */
  flush(): Promise<void>;
  /** Forgets an intent (a final one, usually, once the app has shown its outcome). */
  remove(key: string): Promise<void>;
  /** Calls `listener` on every change of any intent; returns the unsubscribe function. */
  subscribe(listener: (intent: Intent) => void): () => void;
  /** Stops sending and listening; what is stored stays for the next queue. */
  close(): void;
}

const uuid = (): string =>
  crypto.randomUUID?.() ??
  '10000000-1000-4000-8000-100000000000'.replace(/[018]/g, (c) =>
    (+c ^ (crypto.getRandomValues(new Uint8Array(1))[0]! & (15 >> (+c / 4)))).toString(16),
  );
const bySeq = (a: Intent, b: Intent) => a.seq - b.seq;
const nav = (): (Navigator & { locks?: LockManagerLike }) | undefined =>
  typeof navigator === 'undefined' ? undefined : navigator;

/**
 * Creates the queue of intents for one origin (or app). Every tab opening a queue of the same name shares its
 * intents; one of them sends at a time.
 *
 * @example
 * const queue = createIntentQueue({ retentionMs: 24 * 3600_000 });
 * const order = await queue.enqueue({ url: '/api/orders', body: { cart: 42 }, dedupeKey: 'cart-42' });
 * order.subscribe((intent) => render(intent.state));
 */
export function createIntentQueue(options: IntentQueueOptions = {}): IntentQueue {
  for (const option of ['retentionMs', 'keepFinishedMs', 'baseDelayMs', 'maxDelayMs'] as const) {
    const value = options[option];
    if (value !== undefined && !(value > 0))
      throw new TypeError(`${option} must be a positive number, not ${value}`);
  }
  const name = options.name ?? 'inboxkit';
  const storage =
    options.storage ??
    (typeof indexedDB === 'undefined'
      ? (() => {
          throw new TypeError('no IndexedDB here: pass options.storage (see IntentStorage)');
        })()
      : indexedDbStorage(`${name}-intents`));
  const now = options.now ?? Date.now;
  const retentionMs = options.retentionMs ?? 86_400_000;
  const keepFinishedMs = options.keepFinishedMs ?? 604_800_000;
  const locks = options.locks === undefined ? (nav()?.locks ?? null) : options.locks;
  const offline = options.isOffline ?? (() => nav()?.onLine === false);
  const owner = uuid();
  const known = new Map<string, Intent>();
  const marked = new Set<string>();
  const channel =
    typeof BroadcastChannel === 'undefined' ? undefined : new BroadcastChannel(`inboxkit:${name}`);
  let closed = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let enqueued: Promise<unknown> = Promise.resolve();

  // Listeners answer whether the app took the record; a final record the app took starts keepFinishedMs.
  const listeners = new Set<(intent: Intent) => boolean | undefined>();
  const read = (intent: Intent | undefined) => {
    if (intent && isFinal(intent) && intent.readAt === undefined && !marked.has(intent.key)) {
      marked.add(intent.key);
      save({ ...intent, readAt: now() }).catch(() => marked.delete(intent.key));
    }
    return intent;
  };
  const notify = (intent: Intent) => {
    if (JSON.stringify(known.get(intent.key)) === JSON.stringify(intent)) return;
    known.set(intent.key, intent);
    let taken = false;
    for (const listener of listeners) taken = !!listener(intent) || taken;
    if (taken) read(intent);
  };
  const save = async (intent: Intent): Promise<Intent> => {
    await storage.put(intent);
    notify(intent);
    channel?.postMessage(intent.key);
    return intent;
  };
  const list = async () => (await storage.list()).sort(bySeq);
  // Every context keeps a wake-up for the earliest unfinished intent, not only the one that last sent it: when
  // that tab closes, another one still retries (its flush waits for the lock while the sender lives).
  const refresh = async () => {
    const open = (await list()).filter((intent) => (notify(intent), !isFinal(intent)));
    if (open.length > 0) schedule(Math.min(...open.map((intent) => intent.notBefore)));
  };

  const schedule = (at: number) => {
    clearTimeout(timer);
    if (!closed && at < Infinity) timer = setTimeout(() => void flush(), Math.max(0, at - now()));
  };

  const send = async (intent: Intent): Promise<void> => {
    const sending = await save({
      ...intent,
      state: 'sending',
      attempts: intent.attempts + 1,
      firstSentAt: intent.firstSentAt ?? now(),
    });
    let verdict: Verdict | undefined;
    let response: Intent['response'];
    let wait: number | undefined;
    let lastError: string;
    try {
      const headers = new Headers(intent.headers);
      headers.set('idempotency-key', intent.key);
      const res = await (options.fetch ?? fetch)(intent.url, {
        method: intent.method,
        headers,
        body: intent.body,
      });
      const body = await res.text();
      const kept: Record<string, string> = {};
      res.headers.forEach((value, header) => (kept[header] = value));
      response = {
        status: res.status,
        headers: kept,
        body,
        replayed: res.headers.get('idempotent-replayed') === 'true',
      };
      verdict = verdictOf(res.status, body);
      wait = retryAfterMs(res.headers.get('retry-after'), now());
      lastError = `HTTP ${res.status}`;
    } catch (error) {
      lastError = String(error);
    }
    if (verdict && !verdict.retry) {
      const { failure } = verdict;
      await save({
        ...sending,
        state: failure ? 'failed' : 'succeeded',
        response,
        lastError: failure && lastError,
        failure,
      });
    } else if (!verdict && offline()) {
      await save({ ...sending, state: 'waiting-for-network', lastError });
      options.onWaitingForNetwork?.();
    } else {
      const delay = wait ?? backoffDelayMs(sending.attempts, options, options.random);
      await save({ ...sending, state: 'pending', lastError, notBefore: now() + delay });
    }
  };

  // One pass of the sender, under the lock: the head of each group, expired ones surfaced, the due one sent.
  const drain = async (): Promise<void> => {
    while (!closed) {
      const heads = new Map<string, Intent>();
      const t = now();
      for (const intent of await list()) {
        if (isFinal(intent) && intent.readAt !== undefined && t - intent.readAt > keepFinishedMs) {
          await storage.delete(intent.key);
          known.delete(intent.key);
        } else if (!isFinal(intent) && !heads.has(intent.group ?? '')) heads.set(intent.group ?? '', intent);
      }
      const expired = [...heads.values()].find(
        (i) => i.firstSentAt !== undefined && t - i.firstSentAt > retentionMs,
      );
      if (expired) {
        await save({ ...expired, state: 'failed', failure: 'expired' });
        continue;
      }
      if (offline()) {
        for (const head of heads.values()) {
          if (head.state !== 'waiting-for-network') await save({ ...head, state: 'waiting-for-network' });
        }
        if (heads.size > 0) options.onWaitingForNetwork?.();
        return;
      }
      const due = [...heads.values()].filter((i) => i.notBefore <= t).sort(bySeq)[0];
      if (!due) return schedule(Math.min(...[...heads.values()].map((i) => i.notBefore)));
      await send(due);
    }
  };

  const flush = (): Promise<void> => {
    again = true;
    running ??= (async () => {
      while (again && !closed) {
        again = false;
        if (!(await withSenderLock(`inboxkit:${name}`, locks, storage, owner, now, drain)))
          schedule(now() + leaseMs());
      }
    })().finally(() => (running = undefined));
    return running;
  };

  const handle = (key: string): IntentHandle => {
    const subscribe = (listener: (intent: Intent) => void) => {
      const filtered = (intent: Intent) => intent.key === key && (listener(intent), true);
      listeners.add(filtered);
      return () => void listeners.delete(filtered);
    };
    return {
      key,
      current: () => read(known.get(key)),
      subscribe,
      settled: () =>
        new Promise((resolve) => {
          const check = (intent: Intent | undefined) =>
            intent && isFinal(intent) && (stop(), resolve(intent), true);
          const stop = subscribe(check);
          if (check(known.get(key))) read(known.get(key));
        }),
    };
  };

  const enqueue = async (request: IntentRequest): Promise<IntentHandle> => {
    const { url, method = 'POST', body, headers = {}, dedupeKey, group } = request ?? {};
    if (typeof url !== 'string' || url === '') throw new TypeError('enqueue: url must be a non-empty string');
    if (typeof method !== 'string' || method === '') throw new TypeError('enqueue: method must be a string');
    const json = body !== undefined && typeof body !== 'string';
    const text = json ? JSON.stringify(body) : body;
    const head = { ...(json && { 'content-type': 'application/json' }), ...headers };
    // One enqueue at a time in this context, so two clicks in one tick see each other's dedupe key.
    const done = enqueued.then(async () => {
      const stored = await list();
      const t = now();
      const intent: Intent = {
        key: uuid(),
        seq: Math.max(t * 1000, ...stored.map((i) => i.seq + 1)),
        method: method.toUpperCase(),
        url,
        headers: head,
        ...(text !== undefined && { body: text }),
        ...(dedupeKey !== undefined && { dedupeKey }),
        ...(group !== undefined && { group }),
        state: 'pending',
        createdAt: t,
        attempts: 0,
        notBefore: 0,
      };
      // The dedupe check and the insert are one atomic step of the storage, so two tabs cannot both insert.
      const kept =
        dedupeKey === undefined
          ? intent
          : storage.add
            ? await storage.add(intent)
            : (stored.find((i) => i.dedupeKey === dedupeKey) ?? (await storage.put(intent), intent));
      if (kept.key !== intent.key) {
        notify(kept);
        return handle(kept.key);
      }
      await save(intent);
      void flush();
      return handle(intent.key);
    });
    enqueued = done.catch(() => undefined);
    return done;
  };

  const wake = () => void flush();
  const win = typeof addEventListener === 'function';
  if (win) {
    addEventListener('online', wake);
    addEventListener('offline', wake);
  }
  if (channel) channel.onmessage = () => void refresh();
  if (options.autoStart !== false) void refresh().then(flush);

  return {
    enqueue,
    handle,
    list: async () => (await list()).map((intent) => read(intent)!),
    flush,
    async remove(key) {
      await storage.delete(key);
      known.delete(key);
      channel?.postMessage(key);
    },
    subscribe(listener) {
      const taking = (intent: Intent) => (listener(intent), true);
      listeners.add(taking);
      return () => void listeners.delete(taking);
    },
    close() {
      closed = true;
      clearTimeout(timer);
      channel?.close();
      if (win) {
        removeEventListener('online', wake);
        removeEventListener('offline', wake);
      }
    },
  };
}
