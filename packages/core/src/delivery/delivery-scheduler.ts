// Which waiting delivery starts next, for a transport whose broker pushes deliveries (RabbitMQ, NATS), written
// once: at most `concurrency` runs at a time, in arrival order; a crash suspect runs alone — it waits until every
// running delivery has finished, nothing overtakes it meanwhile, and nothing starts beside it until it ends — so
// a crash charges at most the one running (the other half of `AttemptCharger`'s rule); deliveries of one key run
// one at a time in order; fresh deliveries already waiting may join one run (a batch).

/** Options of `DeliveryScheduler`. */
export interface DeliverySchedulerOptions<T> {
  /** Runs at once (a batch is one run). */
  readonly concurrency: number;
  /** Whether new runs may start (false once the transport stops). */
  readonly running: () => boolean;
  /** Starts one run: a single delivery, or a batch. Should not reject; a rejection is dropped. */
  readonly run: (deliveries: readonly T[]) => Promise<void>;
  /** Must this delivery run alone: may it have crashed a process? */
  readonly alone: (delivery: T) => boolean;
  /** Deliveries of one key run one at a time, in arrival order; others pass them. Default: no keys. */
  readonly key?: (delivery: T) => string | undefined;
  /** A delivery that must not start any more (its channel died): dropped when reached. Default: none. */
  readonly stale?: (delivery: T) => boolean;
  /** Most deliveries in one run. Default is 1 (no batches). */
  readonly maxBatch?: number;
  /** Whether `next`, waiting right behind, may join the run `first` heads (never one that runs alone). */
  readonly joins?: (first: T, next: T) => boolean;
}

/**
 * Starts a push transport's deliveries as handlers free up. `push()` a delivery as the broker hands it over;
 * `stop()` takes what never started (to return it to the broker) and `idle()` waits for what runs.
 *
 * @example
 * const scheduler = new DeliveryScheduler<Held>({ concurrency: 8, running: () => !stopped,
 *   alone: (h) => h.suspect, run: ([h]) => this.#process(h!) });
 * scheduler.push(held);
 * const unrun = scheduler.stop(); // back to the broker
 * await settledWithin(scheduler.idle(), closeTimeoutMs);
 */
export class DeliveryScheduler<T> {
  readonly #o: DeliverySchedulerOptions<T>;
  readonly #waiting: T[] = [];
  readonly #runs = new Set<Promise<void>>();
  readonly #busyKeys = new Set<string>();
  #alone = false;

  constructor(options: DeliverySchedulerOptions<T>) {
    this.#o = options;
  }

  /** Runs in progress. */
  get running(): number {
    return this.#runs.size;
  }

  /** Queues a delivery and starts what may start. */
  push(delivery: T): void {
    this.#waiting.push(delivery);
    this.#pump();
  }

  /** Takes every delivery that has not started, in arrival order: the transport hands them back to the broker. */
  stop(): T[] {
    return this.#waiting.splice(0);
  }

  /** Resolves once every run in progress has ended (whether it fulfilled or rejected). */
  async idle(): Promise<void> {
    while (this.#runs.size > 0) await Promise.allSettled([...this.#runs]);
  }

  #pump(): void {
    const o = this.#o;
    for (
      let i = 0;
      i < this.#waiting.length && this.#runs.size < o.concurrency && !this.#alone && o.running();
    ) {
      const first = this.#waiting[i]!;
      if (o.stale?.(first) === true) {
        this.#waiting.splice(i, 1);
        continue;
      }
      const key = o.key?.(first);
      if (key !== undefined && this.#busyKeys.has(key)) {
        i++; // its key's run goes first; others pass it
        continue;
      }
      const alone = o.alone(first);
      if (alone && this.#runs.size > 0) return; // waits for the running ones; nothing overtakes it
      const batch = this.#waiting.splice(i, 1);
      while (!alone && batch.length < (o.maxBatch ?? 1) && i < this.#waiting.length) {
        const next = this.#waiting[i]!;
        if (o.alone(next) || o.joins?.(first, next) !== true) break;
        batch.push(...this.#waiting.splice(i, 1));
      }
      this.#start(batch, alone, key);
    }
  }

  #start(batch: readonly T[], alone: boolean, key: string | undefined): void {
    if (alone) this.#alone = true;
    if (key !== undefined) this.#busyKeys.add(key);
    const run: Promise<void> = this.#o
      .run(batch)
      .catch(() => undefined)
      .finally(() => {
        this.#runs.delete(run);
        if (alone) this.#alone = false;
        if (key !== undefined) this.#busyKeys.delete(key);
        this.#pump();
      });
    this.#runs.add(run);
  }
}
