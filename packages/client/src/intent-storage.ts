// The storage port: where intents live between creation and their final answer. Four verbs on plain records,
// so IndexedDB, React Native's AsyncStorage or SQLite, or a file in Node can each implement it in a few lines.

import type { Intent } from './intent.js';

/**
 * Where a queue keeps its intents. Each method must be durable when its promise resolves: the queue persists an
 * intent (and every state change) before it sends anything.
 *
 * - `list()`: every stored intent, in any order;
 * - `put(intent)`: inserts or replaces the intent with this `key`;
 * - `delete(key)`: removes it (no error when absent);
 * - `add(intent)` (optional): stores `intent` (which has a `dedupeKey`) unless an intent with the same `dedupeKey`
 *   is stored, and resolves with the one stored under that dedupe key (the existing one, or `intent`). Must be
 *   atomic across every context sharing the storage (one IndexedDB transaction, one SQLite transaction with a
 *   unique index). Without it, `enqueue` lists then puts: a dedupe key then collapses repeats within one context
 *   only, and two tabs enqueueing it at the same instant can store two intents;
 * - `lease(name, owner, untilMs, nowMs)` (optional): the fallback sender lock where Web Locks are missing. Must be
 *   atomic across every context sharing the storage: grants (and records `owner` until `untilMs`) when no lease
 *   is held, the held one expired (`until < nowMs`) or `owner` already holds it; refuses otherwise.
 *
 * @example
 * // React Native with AsyncStorage: one JSON entry per intent.
 * const storage: IntentStorage = {
 *   async list() {
 *     const keys = (await AsyncStorage.getAllKeys()).filter((k) => k.startsWith('intent:'));
 *     return (await AsyncStorage.multiGet(keys)).map(([, v]) => JSON.parse(v!));
 *   },
 *   put: (intent) => AsyncStorage.setItem(`intent:${intent.key}`, JSON.stringify(intent)),
 *   delete: (key) => AsyncStorage.removeItem(`intent:${key}`),
 * };
 */
export interface IntentStorage {
  list(): Promise<Intent[]>;
  put(intent: Intent): Promise<void>;
  delete(key: string): Promise<void>;
  add?(intent: Intent): Promise<Intent>;
  lease?(name: string, owner: string, untilMs: number, nowMs: number): Promise<boolean>;
}

/**
 * Intents in memory, lost with the process: for tests, and for a Node process that accepts losing its queue.
 * Records are copied in and out, as a real storage would.
 *
 * @example
 * const queue = createIntentQueue({ storage: memoryStorage() });
 */
export function memoryStorage(): IntentStorage {
  const intents = new Map<string, Intent>();
  const leases = new Map<string, { owner: string; until: number }>();
  return {
    list: async () => [...intents.values()].map((i) => structuredClone(i)),
    put: async (intent) => void intents.set(intent.key, structuredClone(intent)),
    delete: async (key) => void intents.delete(key),
    async add(intent) {
      const same = [...intents.values()].find((i) => i.dedupeKey === intent.dedupeKey);
      if (!same) intents.set(intent.key, structuredClone(intent));
      return same ? structuredClone(same) : intent;
    },
    async lease(name, owner, untilMs, nowMs) {
      const held = leases.get(name);
      if (held && held.owner !== owner && held.until >= nowMs) return false;
      leases.set(name, { owner, until: untilMs });
      return true;
    },
  };
}
