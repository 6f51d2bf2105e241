// One sender at a time across every tab and the service worker: Web Locks where the runtime has them; else a
// lease in the shared storage, renewed while sending; else (one context, as in React Native) the queue alone.

import type { IntentStorage } from './intent-storage.js';

/** The slice of the Web Locks API the queue uses (`navigator.locks`). */
export interface LockManagerLike {
  request(name: string, callback: () => Promise<void>): Promise<unknown>;
}

const LEASE_MS = 10_000;

/**
 * Runs `work` while this context holds the sender lock `name`. Resolves false without running it when a storage
 * lease is held by another context (the caller tries again after `leaseMs()`).
 */
export async function withSenderLock(
  name: string,
  locks: LockManagerLike | null,
  storage: IntentStorage,
  owner: string,
  now: () => number,
  work: () => Promise<void>,
): Promise<boolean> {
  if (locks) {
    await locks.request(name, work);
    return true;
  }
  if (!storage.lease) {
    await work();
    return true;
  }
  const take = () => storage.lease!(name, owner, now() + LEASE_MS, now());
  if (!(await take())) return false;
  const renew = setInterval(() => void take(), LEASE_MS / 3);
  try {
    await work();
  } finally {
    clearInterval(renew);
    await storage.lease(name, owner, 0, now());
  }
  return true;
}

/** How long a storage lease lasts unrenewed (a crashed holder blocks the others this long). */
export const leaseMs = (): number => LEASE_MS;
