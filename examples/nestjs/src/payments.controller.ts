// The payments API: POST /payments charges once per Idempotency-Key. The payment row and the stored response
// commit in one transaction; a retry gets the same response, byte for byte.

import { Body, Controller, Post } from '@nestjs/common';
import { Idempotent, IdempotencyCtx, idempotentReply, type IdempotentRouteContext } from '@inboxkit/nestjs';
import type pg from 'pg';

interface CreatePayment {
  readonly amountCents: number;
}

@Controller('payments')
export class PaymentsController {
  @Post()
  @Idempotent()
  create(
    @Body() body: CreatePayment,
    @IdempotencyCtx() ctx: IdempotentRouteContext<pg.PoolClient>,
  ): Promise<unknown> {
    return ctx.transaction(async (tx) => {
      const { rows } = await tx.query<{ id: string }>(
        'INSERT INTO payments (amount_cents) VALUES ($1) RETURNING id',
        [body.amountCents],
      );
      const id = rows[0]?.id;
      return idempotentReply({
        status: 201,
        headers: { location: `/payments/${id}` },
        body: { id, amountCents: body.amountCents },
      });
    });
  }
}
