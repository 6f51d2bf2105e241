// @Idempotent() routes of a real Nest application, on the Express and on the Fastify platform, against real
// Postgres: the Idempotency-Key protocol of @inboxkit/http through Nest's controllers, guards and pipes.

import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import {
  BadRequestException,
  Body,
  Controller,
  HttpCode,
  Module,
  Post,
  type INestApplication,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { kyselySeam } from '@inboxkit/core/postgres';
import type { Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Idempotent,
  IdempotencyCtx,
  idempotentReply,
  InboxkitModule,
  type IdempotentRouteContext,
} from '../src/index.js';
import { openNestTestDatabase, type NestTestDatabase, type NestTestDB } from './support/nest-database.js';

interface PaymentBody {
  readonly amount: number;
  readonly fail?: 'once-502' | 'once-throw';
  readonly sentAt?: string;
}

type Ctx = IdempotentRouteContext<Transaction<NestTestDB>>;

/** Requests a gated handler is holding, by key: the test opens the gate once it has seen what it asserts. */
const gates = new Map<string, { entered: () => void; open: Promise<void> }>();
const failedOnce = new Set<string>();
const runs = new Map<string, number>();

function principalOf(request: { native: unknown }): string | undefined {
  const headers = (request.native as { headers: Record<string, unknown> }).headers;
  const value = headers['x-principal'];
  return typeof value === 'string' ? value : 'alice';
}

@Controller()
class PaymentsController {
  @Post('payments')
  @Idempotent()
  async create(@Body() body: PaymentBody, @IdempotencyCtx() ctx: Ctx): Promise<unknown> {
    const label = `pay:${ctx.key ?? 'none'}`;
    runs.set(label, (runs.get(label) ?? 0) + 1);
    const gate = ctx.key === undefined ? undefined : gates.get(ctx.key);
    if (gate !== undefined) {
      gate.entered();
      await gate.open;
    }
    if (body.fail === 'once-throw' && !failedOnce.has(label)) {
      failedOnce.add(label);
      throw new BadRequestException('not this time');
    }
    return ctx.transaction(async (tx) => {
      const row = await tx
        .insertInto('effects')
        .values({ consumer: 'http', message_id: label })
        .returning('seq')
        .executeTakeFirstOrThrow();
      if (body.fail === 'once-502' && !failedOnce.has(label)) {
        failedOnce.add(label);
        return idempotentReply({ status: 502, body: { error: 'upstream failed' } });
      }
      return idempotentReply({
        status: 201,
        headers: { location: `/payments/${row.seq}` },
        body: { id: row.seq, amount: body.amount },
      });
    });
  }

  /** A recovery point, then a step that fails once: the retry skips the completed phase and gets its result. */
  @Post('orders')
  @Idempotent()
  async order(@Body() body: PaymentBody, @IdempotencyCtx() ctx: Ctx): Promise<unknown> {
    const label = `order:${ctx.key ?? 'none'}`;
    const reserved = await ctx.phase('reserve', async (tx) => {
      runs.set(label, (runs.get(label) ?? 0) + 1);
      const row = await tx
        .insertInto('effects')
        .values({ consumer: 'http', message_id: label })
        .returning('seq')
        .executeTakeFirstOrThrow();
      return { reservation: row.seq };
    });
    if (body.fail === 'once-throw' && !failedOnce.has(label)) {
      failedOnce.add(label);
      throw new Error('the provider call failed');
    }
    return { ...reserved, attempt: ctx.attempt };
  }

  /** The key from `x-request-id`, and `sentAt` left out of the fingerprint; the body as result, status by @HttpCode. */
  @Post('transfers')
  @HttpCode(202)
  @Idempotent({
    key: (r) => (r.native as { headers: Record<string, string | undefined> }).headers['x-request-id'],
    fingerprint: { exclude: ['sentAt'] },
  })
  async transfer(@Body() body: PaymentBody, @IdempotencyCtx() ctx: Ctx): Promise<unknown> {
    return ctx.transaction(async (tx) => {
      await tx
        .insertInto('effects')
        .values({ consumer: 'http', message_id: `transfer:${ctx.key}` })
        .execute();
      return { accepted: body.amount };
    });
  }
}

let database: NestTestDatabase;

beforeAll(async () => {
  database = await openNestTestDatabase('nest_http');
});

afterAll(async () => {
  await database?.close();
});

async function boot(platform: 'express' | 'fastify'): Promise<{ app: INestApplication; url: string }> {
  @Module({
    imports: [
      InboxkitModule.forRoot({
        seam: kyselySeam(database.db),
        inbox: { schema: database.schema },
        idempotency: { schema: database.schema, principal: principalOf },
      }),
    ],
    controllers: [PaymentsController],
  })
  class AppModule {}
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
  const app = await NestFactory.create(AppModule, adapter, { logger: false });
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return { app, url };
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`@Idempotent() on ${platform}`, () => {
    let app: INestApplication;
    let url: string;

    beforeAll(async () => {
      ({ app, url } = await boot(platform));
    });

    afterAll(async () => {
      await app?.close();
    });

    const post = (path: string, body: unknown, headers: Record<string, string>): Promise<Response> =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });

    it('runs 20 concurrent requests with one key once: the others get 409 or the replayed response', async () => {
      const key = randomUUID();
      const responses = await Promise.all(
        Array.from({ length: 20 }, () => post('/payments', { amount: 10 }, { 'idempotency-key': key })),
      );
      const results = await Promise.all(
        responses.map(async (r) => ({
          status: r.status,
          replayed: r.headers.get('idempotent-replayed'),
          body: await r.text(),
        })),
      );
      const fresh = results.filter((r) => r.status === 201 && r.replayed === null);
      expect(fresh).toHaveLength(1);
      for (const r of results) {
        expect([201, 409]).toContain(r.status);
        if (r.status === 201) expect(r.body).toBe(fresh[0]?.body);
      }
      expect(runs.get(`pay:${key}`)).toBe(1);
      expect(await database.effects(`pay:${key}`)).toBe(1);
    });

    it('answers 409 with Retry-After while the first request is in flight', async () => {
      const key = randomUUID();
      let entered!: () => void;
      const inside = new Promise<void>((resolve) => (entered = resolve));
      let open!: () => void;
      gates.set(key, { entered, open: new Promise<void>((resolve) => (open = resolve)) });
      const first = post('/payments', { amount: 3 }, { 'idempotency-key': key });
      await inside;
      const second = await post('/payments', { amount: 3 }, { 'idempotency-key': key });
      expect(second.status).toBe(409);
      expect(second.headers.get('retry-after')).toBe('1');
      open();
      expect((await first).status).toBe(201);
      gates.delete(key);
    });

    it('replays byte for byte with the stored headers, and answers 422 to another payload under the key', async () => {
      const key = randomUUID();
      const first = await post('/payments', { amount: 5 }, { 'idempotency-key': key });
      const firstBody = Buffer.from(await first.arrayBuffer());
      expect(first.status).toBe(201);
      const replay = await post('/payments', { amount: 5 }, { 'idempotency-key': key });
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.headers.get('location')).toBe(first.headers.get('location'));
      expect(replay.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(Buffer.from(await replay.arrayBuffer()).equals(firstBody)).toBe(true);
      const other = await post('/payments', { amount: 6 }, { 'idempotency-key': key });
      expect(other.status).toBe(422);
      expect(await database.effects(`pay:${key}`)).toBe(1);
    });

    it('releases the key after a 5xx and after a thrown HttpException: the retry runs and its effect commits once', async () => {
      const k502 = randomUUID();
      const a = await post('/payments', { amount: 1, fail: 'once-502' }, { 'idempotency-key': k502 });
      expect(a.status).toBe(502);
      expect(await database.effects(`pay:${k502}`)).toBe(0);
      const b = await post('/payments', { amount: 1, fail: 'once-502' }, { 'idempotency-key': k502 });
      expect(b.status).toBe(201);
      expect(await database.effects(`pay:${k502}`)).toBe(1);

      const kThrow = randomUUID();
      const c = await post('/payments', { amount: 1, fail: 'once-throw' }, { 'idempotency-key': kThrow });
      expect(c.status).toBe(400);
      const d = await post('/payments', { amount: 1, fail: 'once-throw' }, { 'idempotency-key': kThrow });
      expect(d.status).toBe(201);
      expect(runs.get(`pay:${kThrow}`)).toBe(2);
      expect(await database.effects(`pay:${kThrow}`)).toBe(1);
    });

    it('refuses a request without a key with 400 and runs nothing', async () => {
      const response = await post('/payments', { amount: 1 }, {});
      expect(response.status).toBe(400);
      expect(runs.get('pay:none')).toBeUndefined();
    });

    it('keeps a completed phase (recovery point) across a failed attempt: the retry gets its recorded result', async () => {
      const key = randomUUID();
      const failed = await post('/orders', { amount: 1, fail: 'once-throw' }, { 'idempotency-key': key });
      expect(failed.status).toBe(500);
      const retried = await post('/orders', { amount: 1, fail: 'once-throw' }, { 'idempotency-key': key });
      expect(retried.status).toBe(201);
      const body = (await retried.json()) as { reservation: string; attempt: number };
      expect(body.attempt).toBe(2);
      expect(runs.get(`order:${key}`)).toBe(1);
      expect(await database.effects(`order:${key}`)).toBe(1);
    });

    it("takes a route's own key and fingerprint resolvers, and the route's @HttpCode for a returned body", async () => {
      const id = randomUUID();
      const first = await post('/transfers', { amount: 7, sentAt: 'a' }, { 'x-request-id': id });
      expect(first.status).toBe(202);
      expect(await first.json()).toEqual({ accepted: 7 });
      const retry = await post('/transfers', { amount: 7, sentAt: 'b' }, { 'x-request-id': id });
      expect(retry.status).toBe(202);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      const other = await post('/transfers', { amount: 8, sentAt: 'b' }, { 'x-request-id': id });
      expect(other.status).toBe(422);
      expect(await database.effects(`transfer:${id}`)).toBe(1);
    });
  });
}
