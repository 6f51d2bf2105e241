// The fast path's scope inside its authority: the identity of the table that answers for the cache's entries
// (InboxStore#identity(), or the HTTP key table's), read once, folded into every key (fastPathScope). Until it
// is known the fast path is not used: a delivery then goes to Postgres, which is always right.

import { randomUUID } from 'node:crypto';
import type { Logger } from './consumer-types.js';
import { fastPathScope } from './fast-path.js';

/** After a failed read of the identity, how long the fast path stays unused before reading again. */
const RETRY_AFTER_MS = 1_000;

/**
 * The scope of `name` inside its authority, read on first use and kept: `scope()` is the scope, or a promise of
 * it the first time (one read shared by every delivery waiting for it), or `undefined` while the identity
 * cannot be read (logged; read again a second later), when the caller goes to Postgres. Without `read` (a
 * store that cannot say its identity) the identity is random for this process: the entries are then this
 * process's own, never another inbox's, and the logger hears it once. For inboxkit's own packages.
 *
 * @example
 * const authority = new FastPathAuthority(() => store.identity(), 'billing', { logger, label: 'billing: fast path' });
 * const scope = await authority.scope(); // undefined: go to Postgres
 */
export class FastPathAuthority {
  /** Undefined for a store that cannot say its identity (the scope is then set at construction). */
  readonly #read: (() => Promise<string>) | undefined;
  readonly #name: string;
  readonly #logger: Logger | undefined;
  readonly #label: string;
  #scope: string | undefined;
  #reading: Promise<string | undefined> | undefined;
  #retryAt = 0;

  constructor(
    read: (() => Promise<string>) | undefined,
    name: string,
    options: { readonly logger?: Logger; readonly label?: string } = {},
  ) {
    this.#name = name;
    this.#logger = options.logger;
    this.#label = options.label ?? 'fast path';
    if (read === undefined) {
      this.#scope = fastPathScope(`unidentified:${randomUUID()}`, name);
      this.#warn(
        {},
        `${this.#label}: the store cannot say which inbox it is (no identity()): the fast path keeps entries of this process only`,
      );
    }
    this.#read = read;
  }

  /** The scope; undefined while the identity cannot be read. */
  scope(): string | undefined | Promise<string | undefined> {
    if (this.#scope !== undefined || this.#read === undefined) return this.#scope;
    if (this.#reading !== undefined) return this.#reading;
    if (performance.now() < this.#retryAt) return undefined;
    let reading: Promise<string>;
    try {
      reading = this.#read();
    } catch (error) {
      reading = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    this.#reading = reading
      .then((identity) => {
        if (typeof identity !== 'string' || identity === '')
          throw new TypeError(`identity() answered ${typeof identity}`);
        this.#scope = fastPathScope(identity, this.#name);
        this.#reading = undefined;
        return this.#scope;
      })
      .catch((error: unknown) => {
        this.#reading = undefined;
        this.#retryAt = performance.now() + RETRY_AFTER_MS;
        this.#warn(
          { err: error },
          `${this.#label}: could not read which inbox this is; lookups go to Postgres, read again in ${RETRY_AFTER_MS} ms`,
        );
        return undefined;
      });
    return this.#reading;
  }

  #warn(fields: Record<string, unknown>, message: string): void {
    try {
      this.#logger?.warn({ fastPath: this.#label, ...fields }, message);
    } catch {
      // Logging is best effort.
    }
  }
}
