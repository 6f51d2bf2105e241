// Which attempts a crash may charge, written once: a delivery that may have been running when a process died
// is charged a started attempt just before it runs (so a message that kills its process still reaches the DLQ
// after maxAttempts), and such a suspect runs alone, so a crash charges at most the messages that were running
// — one suspect — and never a healthy message fetched beside it. A transport supplies one fact: may this
// delivery have crashed a process (SQS: a receive count above 1; RabbitMQ: the redelivered flag)?

import type { Logger } from '../consumer-types.js';
import { ConfigurationError } from '../errors.js';
import type { InboundMessage } from '../message.js';
import type { Outcome } from '../outcome.js';
import { attemptLedgerOf } from './attempt-ledger.js';
import type { AttemptLedger } from './attempt-ledger.js';

/** How many ids returned to the broker unrun a charger remembers (oldest forgotten first). */
const RETURNED_UNRUN_KEPT = 10_000;

/** Options of `AttemptCharger`. */
export interface AttemptChargerOptions<D> {
  /**
   * The consumer whose inbox records the started attempts: an `idempotentConsumer(...)`, or a wrapper that
   * forwards its attempt ledger (`withAttemptLedger`). Anything else is a ConfigurationError.
   */
  readonly consumer: object;
  /** The message of a delivery. */
  readonly message: (delivery: D) => InboundMessage;
  /**
   * May this delivery have been running when a process died? True for any redelivery the broker cannot tell
   * from a first delivery (SQS: `ApproximateReceiveCount` above 1; RabbitMQ: `fields.redelivered`).
   */
  readonly mayHaveCrashed: (delivery: D) => boolean;
  /**
   * The broker brings a plain retry back the same way as a crashed delivery (SQS: a visibility change raises
   * the receive count too). Then `suspects()` asks the inbox (`crashSuspects`, one read per fetch) and a retry
   * whose failure is on record runs beside the others. Default is false: every delivery that may have crashed
   * is a suspect without a read (RabbitMQ: a retry comes back as a fresh copy from the delay queue).
   */
  readonly retriesLookRedelivered?: boolean;
  readonly logger: Logger;
  /** Names the transport in log messages. */
  readonly what: string;
}

/**
 * Charges attempts for a transport: `suspects()` says which deliveries run alone (each with the attempts it
 * has used, the most first), `start()` charges before the run and marks the ids in hand until released, and
 * `returned()` / `settled()` remember what went back without running, so its next delivery is charged nothing.
 * One record per id in hand, not per copy: a process that died holding several copies of an id (producer
 * duplicates) gets them all back, and each copy's record would charge one more attempt.
 *
 * The other half — a suspect waits until every running handler has finished and nothing starts beside it until
 * it settles — is `DeliveryScheduler` for a transport whose broker pushes deliveries (RabbitMQ, NATS); SQS, which
 * pulls, takes every handler slot for a suspect (`Slots.acquireAll`).
 *
 * @example
 * const charger = new AttemptCharger({ consumer, logger, what: 'sqsConsumer', message: (h) => h.inbound,
 *   mayHaveCrashed: (h) => h.receiveCount > 1, retriesLookRedelivered: true });
 * const suspects = await charger.suspects(received);   // run these alone, the most attempts first
 * const release = await charger.start([held]);         // charge-before-run
 * try { outcome = await guard.handle(held.inbound); } finally { release(); }
 * charger.settled(held, outcome);
 */
export class AttemptCharger<D> {
  readonly #o: AttemptChargerOptions<D>;
  readonly #ledger: AttemptLedger;
  /** Copies of each message id being handled in this process right now. */
  readonly #inHand = new Map<string, number>();
  /** Ids returned to the broker without their handler running here: their next delivery is no suspect. */
  readonly #returnedUnrun = new Set<string>();

  constructor(options: AttemptChargerOptions<D>) {
    this.#o = options;
    const ledger = attemptLedgerOf(options.consumer);
    if (ledger === undefined) {
      throw new ConfigurationError(
        `${options.what}: \`handler\` must be an idempotentConsumer(...), or a wrapper of one that forwards its ` +
          'attempt ledger (withAttemptLedger(wrapper, attemptLedgerOf(inner)))',
      );
    }
    this.#ledger = ledger;
  }

  /**
   * Whether `delivery` may have crashed a process and was not returned unrun from here: without
   * `retriesLookRedelivered`, a suspect; with it, one to ask `suspects()` about.
   */
  maySuspect(delivery: D): boolean {
    const id = this.#o.message(delivery).id;
    return this.#o.mayHaveCrashed(delivery) && id !== undefined && !this.#returnedUnrun.has(id);
  }

  /**
   * The suspects among a fetch's deliveries, each with the attempts it has used so far (0 when unknown).
   * Suspects run alone, the one with the most attempts used first: the one a crash could dead-letter soonest.
   * Never rejects: when the inbox cannot be read, every one that may have crashed is a suspect.
   */
  async suspects(deliveries: readonly D[]): Promise<ReadonlyMap<D, number>> {
    const asked = deliveries.filter((d) => this.maySuspect(d));
    const result = new Map<D, number>();
    if (asked.length === 0) return result;
    if (this.#o.retriesLookRedelivered !== true) {
      for (const d of asked) result.set(d, 0);
      return result;
    }
    let found: ReadonlyMap<string, number> | undefined;
    try {
      // A ledger without it: every one may have crashed.
      found = await this.#ledger.crashSuspects?.(asked.map((d) => this.#o.message(d)));
    } catch {
      found = undefined; // never rejects by contract; if it does, every one may have crashed
    }
    for (const d of asked) {
      if (found === undefined) result.set(d, 0);
      else {
        const used = found.get(this.#o.message(d).id!);
        if (used !== undefined) result.set(d, used);
      }
    }
    return result;
  }

  /**
   * Charge-before-run: records a started attempt (one statement for the lot) for each delivery that may have
   * crashed a process, unless it was returned unrun from here or another copy of its id is in hand, and marks
   * every id in hand until the returned function is called. The record is the attempt about to run (a claim
   * counts `max(attempts + 1, started)`), so a delivery that then runs loses nothing. Never rejects: when the
   * store is down the claim meets it too, and the delivery waits.
   */
  async start(deliveries: readonly D[]): Promise<() => void> {
    const starting: InboundMessage[] = [];
    const ids: string[] = [];
    for (const d of deliveries) {
      const message = this.#o.message(d);
      const id = message.id;
      if (id === undefined) continue;
      const unrun = this.#returnedUnrun.delete(id);
      if (this.#o.mayHaveCrashed(d) && !unrun && !this.#inHand.has(id)) starting.push(message);
      // In hand from now on (before the record's round trip, so a copy fetched meanwhile sees it).
      this.#inHand.set(id, (this.#inHand.get(id) ?? 0) + 1);
      ids.push(id);
    }
    const release = (): void => {
      for (const id of ids) {
        const n = (this.#inHand.get(id) ?? 1) - 1;
        if (n <= 0) this.#inHand.delete(id);
        else this.#inHand.set(id, n);
      }
    };
    if (starting.length === 0) return release;
    try {
      await this.#ledger.recordAttemptsStarted(starting);
    } catch (error) {
      this.#o.logger.warn(
        { err: error, count: starting.length },
        `${this.#o.what}: could not record started attempts`,
      );
    }
    return release;
  }

  /**
   * `start(deliveries)`, then `run()`, then the release: the usual way to charge a run. Rejects only when
   * `run` does.
   *
   * @example
   * const outcome = await charger.charged([held], () => guard.handle(held.inbound));
   */
  async charged<T>(deliveries: readonly D[], run: () => Promise<T>): Promise<T> {
    const release = await this.start(deliveries);
    try {
      return await run();
    } finally {
      release();
    }
  }

  /** These deliveries go back to the broker without having run here: their next delivery is charged nothing. */
  returned(deliveries: readonly D[]): void {
    for (const d of deliveries) this.#rememberUnrun(this.#o.message(d).id);
  }

  /** Records how `delivery` ended: a retry whose handler did not run (a lock wait, an outage) went back unrun. */
  settled(delivery: D, outcome: Outcome | { readonly status: 'rejected' }): void {
    if (outcome.status === 'retry' && outcome.reason !== 'handler-error')
      this.#rememberUnrun(this.#o.message(delivery).id);
  }

  #rememberUnrun(id: string | undefined): void {
    if (id === undefined) return;
    if (this.#returnedUnrun.size >= RETURNED_UNRUN_KEPT)
      this.#returnedUnrun.delete(this.#returnedUnrun.values().next().value!);
    this.#returnedUnrun.add(id);
  }
}
