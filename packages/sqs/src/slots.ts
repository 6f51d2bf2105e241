// A counting semaphore that can be closed: the consumer bounds held messages and running handlers with two of
// them, and closing wakes every waiter at once when the consumer stops. A crash suspect takes every slot at
// once (`acquireAll`), so it runs alone.

/** `size` slots; `acquire` waits for free ones until `close()`. */
export class Slots {
  readonly #size: number;
  #used = 0;
  /** `acquireAll` calls waiting, in call order: no `acquire` succeeds meanwhile. */
  readonly #exclusive: { readonly priority: number }[] = [];
  #closed = false;
  #waiters: (() => void)[] = [];

  constructor(size: number) {
    this.#size = size;
  }

  /** Slots in use. */
  get used(): number {
    return this.#used;
  }

  /** Every slot (what `acquireAll` takes and its holder gives back). */
  get size(): number {
    return this.#size;
  }

  /**
   * Takes `n` slots once they are free and no `acquireAll` is waiting: true, or false (nothing taken) when
   * closed first.
   */
  async acquire(n = 1): Promise<boolean> {
    while (!this.#closed && (this.#exclusive.length > 0 || this.#used + n > this.#size)) await this.#wait();
    if (this.#closed) return false;
    this.#used += n;
    return true;
  }

  /**
   * Takes every slot once all are free: true, or false (nothing taken) when closed first. From the call on,
   * no `acquire` succeeds until it is done, so what runs drains and nothing starts beside its holder. Of
   * several waiting, the highest `priority` goes first (then the first caller). The holder gives the slots
   * back with `release(size)`.
   */
  async acquireAll(priority = 0): Promise<boolean> {
    const me = { priority };
    this.#exclusive.push(me);
    try {
      while (!this.#closed && (this.#used > 0 || this.#nextExclusive() !== me)) await this.#wait();
    } finally {
      this.#exclusive.splice(this.#exclusive.indexOf(me), 1);
    }
    if (this.#closed) return false;
    this.#used = this.#size;
    return true;
  }

  /** Gives back `n` slots. */
  release(n = 1): void {
    if (n <= 0) return;
    this.#used -= n;
    this.#wake();
  }

  /** Refuses further acquisitions and wakes every waiter (which then gets false). */
  close(): void {
    this.#closed = true;
    this.#wake();
  }

  /** The `acquireAll` waiting with the highest priority, the first of equals. */
  #nextExclusive(): { readonly priority: number } | undefined {
    let next = this.#exclusive[0];
    for (const e of this.#exclusive) if (e.priority > next!.priority) next = e;
    return next;
  }

  #wait(): Promise<void> {
    return new Promise<void>((resolve) => this.#waiters.push(resolve));
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }
}
