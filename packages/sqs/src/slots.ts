// A counting semaphore that can be closed: the consumer bounds held messages and running handlers with two of
// them, and closing wakes every waiter at once when the consumer stops.

/** `size` slots; `acquire` waits for free ones until `close()`. */
export class Slots {
  readonly #size: number;
  #used = 0;
  #closed = false;
  #waiters: (() => void)[] = [];

  constructor(size: number) {
    this.#size = size;
  }

  /** Slots in use. */
  get used(): number {
    return this.#used;
  }

  /** Takes `n` slots once they are free: true, or false (nothing taken) when closed first. */
  async acquire(n = 1): Promise<boolean> {
    while (!this.#closed && this.#used + n > this.#size) {
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
    if (this.#closed) return false;
    this.#used += n;
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

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }
}
