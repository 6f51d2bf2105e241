// transactionalOutbox(): the binder for idempotentConsumer's `outbox` option. Core calls it on a run's first use
// of `context.outbox` with the run's transaction and origin; what it returns is the handler's outbox, whose
// type this module merges into core's `HandlerOutbox`.

import { ConfigurationError, type OutboxBinder, type OutboxOrigin } from '@inboxkit/core';
import { deterministicMessageId } from './deterministic-message-id.js';
import { notifyOption, outbox, type EnqueueOptions, type OutboxTransaction } from './enqueue.js';
import type { OutboxMessage } from './outbox-message.js';
import { resolveOutboxTableNames } from './outbox-table-names.js';

/** Options of one `context.outbox.enqueue` call. */
export interface HandlerEnqueueOptions {
  /**
   * Names this outgoing message among those the handler emits for one incoming message (`'charge'`,
   * `'notify'`, an index …). Its id is then `deterministicMessageId(consumer, incoming id, step)`: the same on
   * every attempt, process and replay, so a re-run enqueues the same id (kept once by the outbox, and
   * deduplicated downstream). Do not combine with `message.id`. Default: none (a new UUIDv7 per enqueue, unless
   * `message.id` is given).
   */
  readonly step?: string | number;
}

declare module '@inboxkit/core' {
  interface HandlerOutbox {
    /**
     * Enqueues `message` in the run's transaction: it commits with the inbox record and the effect, or not at
     * all. Resolves with its id: `message.id`, else the deterministic id of `options.step`, else a new UUIDv7.
     *
     * @example
     * await context.outbox.enqueue({ publisher: 'kafka', destination: 'payments.charged', key: order.id, body }, { step: 'charge' });
     */
    enqueue(message: OutboxMessage, options?: HandlerEnqueueOptions): Promise<string>;
    /** The id `enqueue(…, { step })` gives: `deterministicMessageId(origin.consumer, origin.messageId, step)`. */
    messageId(step: string | number): string;
    /** The delivery this outbox is bound to (consumer, incoming message id, attempt). */
    readonly origin: OutboxOrigin;
  }
}

function checkStep(step: unknown): string | number {
  if ((typeof step !== 'string' || step === '') && (typeof step !== 'number' || !Number.isFinite(step))) {
    throw new ConfigurationError(`context.outbox: \`step\` must be a non-empty string or a finite number, got ${JSON.stringify(step)}`);
  }
  return step;
}

/**
 * The `outbox` option of `idempotentConsumer()`: gives each handler run `context.outbox`, bound to its
 * transaction (Kysely's, or any data layer's from `@inboxkit/data`), so outgoing messages commit with the inbox
 * record and the effect (a failed attempt leaves none).
 * Options as `enqueue`'s (table, default `inboxkit.outbox`; `notify`, default true), validated here, once. Pass
 * `{ step }` to `enqueue` for an id derived from (consumer, incoming id, step), the same on every attempt.
 *
 * @example
 * import { transactionalOutbox } from '@inboxkit/outbox';
 * idempotentConsumer({
 *   name: 'orders', store, outbox: transactionalOutbox(),
 *   handler: async (message, { tx, outbox }) => {
 *     await tx.insertInto('orders').values(order).execute();
 *     await outbox.enqueue({ publisher: 'kafka', destination: 'orders.created', key: order.id, body: JSON.stringify(order) }, { step: 'created' });
 *   },
 * });
 */
export function transactionalOutbox(options: EnqueueOptions = {}): OutboxBinder<OutboxTransaction> {
  const names = resolveOutboxTableNames(options);
  const table = { schema: names.schema, table: names.table, notify: notifyOption(options) };
  return (tx, origin) => {
    const bound = outbox(tx, table);
    const messageId = (step: string | number): string => deterministicMessageId(origin.consumer, origin.messageId, checkStep(step));
    return Object.freeze({
      origin,
      messageId,
      async enqueue(message: OutboxMessage, enqueueOptions: HandlerEnqueueOptions = {}): Promise<string> {
        if (enqueueOptions.step === undefined) return bound.enqueue(message);
        if (message.id !== undefined) {
          throw new ConfigurationError('context.outbox.enqueue: pass either `message.id` or `step`, not both');
        }
        return bound.enqueue({ ...message, id: messageId(enqueueOptions.step) });
      },
    });
  };
}
