// Parameter decorators of @EventPattern handlers run by the inboxkit transport.

import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { ConfigurationError } from '@inboxkit/core';
import { isInboxContextMark } from '../inbox-handler-failure.js';
import type { InboxContext } from './inbox-context.js';

function inboxContextOf(context: ExecutionContext, what: string): InboxContext {
  const found = context.switchToRpc().getContext<unknown>();
  if (!isInboxContextMark(found)) {
    throw new ConfigurationError(
      `${what} is only available in an @EventPattern handler run by InboxkitTransport`,
    );
  }
  return found as InboxContext;
}

/**
 * The delivery's transaction (core's `context.tx`): the effect written through it commits with the inbox
 * record, or not at all. Its type is the data layer's transaction (Kysely's `Transaction<DB>`, a Prisma
 * transaction client, a TypeORM `EntityManager` …).
 *
 * @example
 * @EventPattern('orders.placed')
 * place(@Payload() order: Order, @InboxTx() tx: Transaction<DB>) {
 *   return tx.insertInto('orders').values(order).execute();
 * }
 */
export const InboxTx = createParamDecorator(
  (_data: unknown, context: ExecutionContext) => inboxContextOf(context, '@InboxTx()').tx,
);

/** The delivery's whole `InboxContext` (the same object as `@Ctx()`, checked). */
export const InboxCtx = createParamDecorator((_data: unknown, context: ExecutionContext) =>
  inboxContextOf(context, '@InboxCtx()'),
);
