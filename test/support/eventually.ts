// Waits for state that no event announces (the fast path writes its entry after the outcome, unawaited): polls
// `check` every 10 ms until it holds, and fails after `timeoutMs`.
import { setTimeout as sleep } from 'node:timers/promises';

/** Resolves once `check` returns true; rejects after `timeoutMs` (default 5,000). */
export async function eventually(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await sleep(10);
  }
}
