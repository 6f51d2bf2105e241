// The delivery kit assembled once for a transport: the guarded handle (DeliveryGuard), the attempt charger
// (AttemptCharger) and settle() over the transport's verbs, wired the same way for every broker. A transport
// gives its port, its declared features and its one fact about crashes; it receives, bounds concurrency, and
// calls `handle`/`handleBatch` then `settle` for each delivery.

import type { IdempotentConsumer } from '../consumer-types.js';
import type { InboundMessage } from '../message.js';
import { AttemptCharger } from './attempt-charger.js';
import type { AttemptChargerOptions } from './attempt-charger.js';
import type { BrokerSettlement } from './broker-settlement.js';
import { DeliveryGuard } from './delivery-guard.js';
import type { DeliveryGuardOptions, GuardedOutcome } from './delivery-guard.js';
import { settle } from './settle.js';
import type { Settlement, SettleOptions } from './settle.js';

/** Options of `DeliveryKit`: those of `DeliveryGuard`, `AttemptCharger` and `settle()`, and the port. */
export interface DeliveryKitOptions<D>
  extends Omit<DeliveryGuardOptions, 'consumer'>, Omit<AttemptChargerOptions<D>, 'consumer'>, SettleOptions {
  /** The idempotent consumer (its attempt ledger is read by the charger, see `AttemptChargerOptions`). */
  readonly consumer: Pick<IdempotentConsumer, 'handle' | 'handleBatch'>;
  /** The transport's settlement verbs. */
  readonly port: BrokerSettlement<D>;
  /** Logged with a delivery's settlement, beside `context`. Default is none. */
  readonly deliveryContext?: (delivery: D) => Readonly<Record<string, unknown>>;
}

/**
 * One transport's delivery kit: `handle`/`handleBatch` run deliveries through the guard, charged a started
 * attempt first when they may have crashed a process; `settle` tells the charger and settles through the port.
 *
 * @example
 * const kit = new DeliveryKit({ consumer: handler, port, features, running, sleep, message: (d) => d.inbound,
 *   mayHaveCrashed: (d) => d.redelivered, logger, what: 'rabbitmq consumer', context: { queue } });
 * await kit.settle(delivery, await kit.handle(delivery));
 */
export class DeliveryKit<D> {
  readonly guard: DeliveryGuard;
  readonly charger: AttemptCharger<D>;
  readonly #o: DeliveryKitOptions<D>;

  constructor(options: DeliveryKitOptions<D>) {
    this.#o = options;
    this.guard = new DeliveryGuard(options);
    this.charger = new AttemptCharger(options);
  }

  /** `handle()` of one delivery, charged first when it may have crashed a process. Never rejects. */
  handle(delivery: D): Promise<GuardedOutcome> {
    return this.charger.charged([delivery], () => this.guard.handle(this.#o.message(delivery)));
  }

  /** `handleBatch()` of `deliveries` (one transaction), the suspects among them charged first. Never rejects. */
  handleBatch(deliveries: readonly D[]): Promise<GuardedOutcome[]> {
    const messages: InboundMessage[] = deliveries.map((d) => this.#o.message(d));
    return this.charger.charged(deliveries, () => this.guard.handleBatch(messages));
  }

  /** Tells the charger `delivery` settled with `outcome`, then settles it through the port (`settle()`). */
  settle(delivery: D, outcome: GuardedOutcome): Promise<Settlement> {
    this.charger.settled(delivery, outcome);
    const { logger, what, context, deliveryContext } = this.#o;
    const extra = deliveryContext?.(delivery);
    return settle(this.#o.port, delivery, outcome, {
      logger,
      what,
      ...(context !== undefined || extra !== undefined ? { context: { ...context, ...extra } } : {}),
    });
  }
}
