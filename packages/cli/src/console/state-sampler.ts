// The console's memory of the inbox over time: rows per consumer and state, read every few seconds while the
// console runs (one grouped count, the same query as `inboxkit status`). The page draws them as a sparkline per
// state, so a queue of dead letters that grows, or a backlog that drains, shows as a shape.

import type { InboxInspector, InboxStatus } from '@inboxkit/core';

import type { Clock } from '../replay/clock.js';

/** Rows per state of one consumer at one time. */
export type StateCounts = Readonly<Record<InboxStatus, number>>;

/** One reading of the inbox. */
export interface StateSample {
  readonly at: Date;
  readonly consumers: Readonly<Record<string, StateCounts>>;
}

const EMPTY: StateCounts = { processing: 0, failed: 0, completed: 0, dead_lettered: 0, discarded: 0, archived: 0 };

/**
 * Reads `countByStatus` now and then every `intervalMs`, keeping the last `capacity` readings. A failed
 * reading is skipped (the page shows the gap); `error` holds the last failure until a reading succeeds.
 */
export class StateSampler {
  readonly #inspector: Pick<InboxInspector, 'countByStatus'>;
  readonly #clock: Clock;
  readonly #intervalMs: number;
  readonly #capacity: number;
  readonly #samples: StateSample[] = [];
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #error: string | undefined;

  constructor(
    inspector: Pick<InboxInspector, 'countByStatus'>,
    clock: Clock,
    options: { readonly intervalMs: number; readonly capacity?: number },
  ) {
    this.#inspector = inspector;
    this.#clock = clock;
    this.#intervalMs = options.intervalMs;
    this.#capacity = options.capacity ?? 720;
  }

  /** The readings so far, oldest first. */
  get samples(): readonly StateSample[] {
    return this.#samples;
  }

  /** The last reading's error, if it failed. */
  get error(): string | undefined {
    return this.#error;
  }

  /** Takes one reading now (also what the timer calls). Concurrent calls share one query. */
  sample(): Promise<void> {
    this.#running ??= this.#read().finally(() => (this.#running = undefined));
    return this.#running;
  }

  /** Takes the first reading, then one every interval until `stop()`. */
  async start(): Promise<void> {
    await this.sample();
    this.#timer = setInterval(() => void this.sample(), this.#intervalMs);
    this.#timer.unref();
  }

  /** Stops the timer and waits for a reading in flight. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  async #read(): Promise<void> {
    try {
      const counts = await this.#inspector.countByStatus();
      const consumers: Record<string, Record<InboxStatus, number>> = {};
      for (const { consumer, status, count } of counts) {
        consumers[consumer] ??= { ...EMPTY };
        consumers[consumer][status] = count;
      }
      this.#samples.push({ at: new Date(this.#clock.now()), consumers });
      if (this.#samples.length > this.#capacity)
        this.#samples.splice(0, this.#samples.length - this.#capacity);
      this.#error = undefined;
    } catch (error) {
      this.#error = error instanceof Error ? error.message : String(error);
    }
  }
}
