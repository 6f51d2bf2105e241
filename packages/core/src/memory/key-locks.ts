// Per-key mutual exclusion with a bounded wait: the in-memory stand-in for Postgres row locks, so a concurrent
// delivery of the same id waits for the first one's commit or rollback, as it would on the unique index.

/** Releases a held key. */
export type Release = () => void;

export class KeyLocks {
  readonly #queues = new Map<string, (() => void)[]>();

  /** Resolves with a release function once `key` is free, or `undefined` after `timeoutMs` (if given). */
  acquire(key: string, timeoutMs?: number): Promise<Release | undefined> {
    const queue = this.#queues.get(key);
    if (queue === undefined) {
      this.#queues.set(key, []);
      return Promise.resolve(this.#releaser(key));
    }
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const grant = (): void => {
        if (timer !== undefined) clearTimeout(timer);
        resolve(this.#releaser(key));
      };
      queue.push(grant);
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          const i = queue.indexOf(grant);
          if (i >= 0) queue.splice(i, 1);
          resolve(undefined);
        }, timeoutMs);
      }
    });
  }

  /** True when some transaction holds `key`. */
  isHeld(key: string): boolean {
    return this.#queues.has(key);
  }

  #releaser(key: string): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const queue = this.#queues.get(key);
      const next = queue?.shift();
      if (next !== undefined) next();
      else this.#queues.delete(key);
    };
  }
}
