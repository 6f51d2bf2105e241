// The context an @EventPattern handler run by the inboxkit transport gets (@Ctx() or @InboxCtx()): the
// decoded message and core's HandlerContext — the transaction the effect must use, the attempt, the
// downstream keys and the abort signal.

import { BaseRpcContext, RpcException } from '@nestjs/microservices';
import type { DecodedMessage, HandlerContext } from '@inboxkit/core';
import {
  INBOX_CONTEXT_BRAND,
  type InboxContextMark,
  type InboxHandlerFailure,
} from '../inbox-handler-failure.js';

/**
 * One delivery's context, for `@Ctx()` / `@InboxCtx()`. `tx` is the transaction that commits with the inbox
 * record: write the effect through it (`@InboxTx()` gives it directly).
 *
 * @example
 * @EventPattern('orders.placed')
 * place(@Payload() order: Order, @InboxCtx() ctx: InboxContext<Order, Transaction<DB>>) {
 *   return ctx.tx.insertInto('orders').values({ id: order.id, attempt: ctx.attempt }).execute();
 * }
 */
export class InboxContext<P = unknown, Tx = unknown>
  extends BaseRpcContext<[DecodedMessage<P>, HandlerContext<Tx>]>
  implements InboxContextMark
{
  readonly [INBOX_CONTEXT_BRAND] = true as const;

  constructor(message: DecodedMessage<P>, context: HandlerContext<Tx>) {
    super([message, context]);
  }

  /** The decoded, validated message: id, payload, headers, timestamp, source, replay marker. */
  get message(): DecodedMessage<P> {
    return this.args[0];
  }

  /** Core's handler context (tx, attempt, downstream keys, signal, consumer, outbox …). */
  get handlerContext(): HandlerContext<Tx> {
    return this.args[1];
  }

  /** The transaction the effect must use: it commits together with the inbox record, or not at all. */
  get tx(): Tx {
    return this.args[1].tx;
  }

  /** This attempt, 1-based, durable across restarts. */
  get attempt(): number {
    return this.args[1].attempt;
  }

  /** The key for downstream calls, the same on every attempt (see `HandlerContext.downstreamKey`). */
  get downstreamKey(): string {
    return this.args[1].downstreamKey;
  }

  /** The key of one named downstream step (see `HandlerContext.downstreamKeyFor`). */
  downstreamKeyFor(step: string): string {
    return this.args[1].downstreamKeyFor(step);
  }

  /** Aborted when the handler timeout passes or, in leased mode, when the lease is lost. */
  get signal(): AbortSignal {
    return this.args[1].signal;
  }

  /** The consumer's name. */
  get consumer(): string {
    return this.args[1].consumer;
  }

  /** True when this delivery is an explicit DLQ replay. */
  get isReplay(): boolean {
    return this.args[1].isReplay;
  }

  /** @internal Wraps a handler's error so Nest's RPC exception filter passes it through unchanged. */
  passThrough(failure: InboxHandlerFailure): unknown {
    return new RpcException(failure);
  }
}
