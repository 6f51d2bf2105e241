// The middleware's request metrics and onOutcome hook, through a real Express server on real Postgres: each
// outcome (first request, replay, 409 in flight, 422 other payload, 5xx and thrown handler releasing the key,
// lease takeover) is counted under the route template, method, outcome and status class, the handler's run time
// is recorded, no series carries the key, the principal or the raw path, and a throwing hook changes nothing.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import Fastify from 'fastify';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Attributes, Counter, Histogram, Meter, MeterProvider } from '@opentelemetry/api';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyKeys, type IdempotencyOutcomeEvent } from '../src/index.js';
import { idempotentExpressHandler } from '../src/express/index.js';
import { idempotentNodeHandler } from '../src/node/index.js';
import { idempotentFastifyHandler } from '../src/fastify/index.js';
import { recordingMeterProvider } from '../../../test/support/recording-meter-provider.js';
import { openHttpTestDatabase, type HttpTestDatabase } from './support/http-test-database.js';
import { listen } from './support/listen.js';

const REQUESTS = 'inboxkit.http.requests';
const DURATION = 'inboxkit.http.handler.duration';
const TAKEOVERS = 'inboxkit.http.lease_takeovers';
const ROUTE = '/payments/:id';

let t: HttpTestDatabase;

beforeAll(async () => {
  t = await openHttpTestDatabase('http_metrics');
});

afterAll(async () => {
  await t?.close();
});

/** A gate a handler waits on, opened by the test; `entered` resolves once the handler is waiting. */
interface Gate {
  entered: Promise<void>;
  enter(): void;
  open(): void;
  opened: Promise<void>;
}

function gate(): Gate {
  let enter!: () => void;
  let open!: () => void;
  const entered = new Promise<void>((resolve) => (enter = resolve));
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { entered, enter, opened, open };
}

/** One Express app on its own middleware, meter and hook. */
async function start(options: { readonly handlerTimeoutMs?: number } = {}) {
  const recorder = recordingMeterProvider();
  // Every attribute set any instrument was given, to prove no series names a key, a principal or a path.
  const attributeSets: Attributes[] = [];
  const inner = recorder.provider.getMeter('@inboxkit/http');
  const meter = {
    createCounter: (name: string) => {
      const counter = inner.createCounter(name);
      return {
        add: (value: number, attributes?: Attributes) => {
          attributeSets.push(attributes ?? {});
          counter.add(value, attributes);
        },
      } as unknown as Counter;
    },
    createHistogram: (name: string) => {
      const histogram = inner.createHistogram(name);
      return {
        record: (value: number, attributes?: Attributes) => {
          attributeSets.push(attributes ?? {});
          histogram.record(value, attributes);
        },
      } as unknown as Histogram;
    },
  } as unknown as Meter;
  const provider: MeterProvider = { getMeter: () => meter };
  const events: IdempotencyOutcomeEvent[] = [];
  const hookErrors: unknown[] = [];
  const gates = new Map<string, Gate>();
  const keys = idempotencyKeys({
    db: t.db,
    schema: t.schema,
    principal: (request: { native: Request }) => String(request.native.headers['x-tenant']),
    ...(options.handlerTimeoutMs === undefined ? {} : { handlerTimeoutMs: options.handlerTimeoutMs }),
    meterProvider: provider,
    logger: {
      debug: () => undefined,
      info: () => undefined,
      warn: () => undefined,
      error: (obj: object) => void hookErrors.push((obj as { err?: unknown }).err),
    },
    onOutcome: (event) => {
      events.push(event);
      if (event.key?.startsWith('hook-throws-')) throw new Error('the hook failed');
    },
  });
  const app = express();
  app.post(
    '/payments/:id',
    express.json(),
    idempotentExpressHandler(keys, async (request, context) => {
      const body = request.body as { mode: string };
      const waiting = gates.get(context.key ?? '');
      if (request.headers['x-gate'] === 'yes' && waiting !== undefined) {
        waiting.enter();
        await waiting.opened;
      }
      if (body.mode === 'throw') throw new Error('the handler failed');
      if (body.mode === 'hang') {
        // Until handlerTimeoutMs aborts it.
        await new Promise((resolve) => context.signal.addEventListener('abort', resolve));
        return { status: 201, body: { late: true } };
      }
      if (body.mode === 'unavailable') return { status: 503, body: { retry: true } };
      return context.transaction(async (tx) => {
        await tx
          .insertInto('effects')
          .values({ label: context.key ?? 'none' })
          .execute();
        return { status: 201, body: { id: request.params['id'] } };
      });
    }),
  );
  app.use((error: Error, _request: Request, response: Response, _next: NextFunction) => {
    response.status(500).json({ error: error.message });
  });
  const server = await listen(createServer(app));
  const send = (
    key: string,
    body: object,
    options: { readonly id?: string; readonly gated?: boolean } = {},
  ) =>
    fetch(`${server.url}/payments/${options.id ?? '42'}`, {
      method: 'POST',
      headers: {
        'idempotency-key': key,
        'x-tenant': 'tenant-secret',
        'content-type': 'application/json',
        ...(options.gated === true ? { 'x-gate': 'yes' } : {}),
      },
      body: JSON.stringify(body),
    });
  const requests = (outcome: string, statusClass: string) =>
    recorder.value(REQUESTS, { route: ROUTE, method: 'POST', outcome, status_class: statusClass });
  /** No attribute value of any series names a key, the principal or a raw path. */
  const expectLowCardinality = (secrets: readonly string[]) => {
    expect(attributeSets.length).toBeGreaterThan(0);
    for (const attributes of attributeSets) {
      for (const value of Object.values(attributes)) {
        for (const secret of [...secrets, 'tenant-secret', '/payments/42', '/payments/43'])
          expect(String(value)).not.toContain(secret);
      }
    }
  };
  const close = async () => {
    // A test that failed early must not leave a handler waiting.
    for (const waiting of gates.values()) waiting.open();
    await server.close();
  };
  return { recorder, events, hookErrors, gates, send, requests, expectLowCardinality, close };
}

describe('request metrics and onOutcome', () => {
  it('counts a first request and its replay under the route template, and records the handler duration', async () => {
    const s = await start();
    try {
      const key = randomUUID();
      expect((await s.send(key, { mode: 'ok' })).status).toBe(201);
      const replay = await s.send(key, { mode: 'ok' });
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(s.requests('completed', '2xx')).toBe(1);
      expect(s.requests('replay', '2xx')).toBe(1);
      expect(s.recorder.value(DURATION, { route: ROUTE, method: 'POST', result: 'ok' })).toBe(1);
      expect(s.events.map((e) => [e.outcome, e.route, e.method, e.status, e.statusClass, e.key])).toEqual([
        ['completed', ROUTE, 'POST', 201, '2xx', key],
        ['replay', ROUTE, 'POST', 201, '2xx', key],
      ]);
      expect(s.events[0]!.durationMs).toBeGreaterThanOrEqual(0);
      expect(s.events[1]!.durationMs).toBeUndefined();
      // Another path under the same template is the same series.
      expect((await s.send(randomUUID(), { mode: 'ok' }, { id: '43' })).status).toBe(201);
      expect(s.requests('completed', '2xx')).toBe(2);
      s.expectLowCardinality([key]);
    } finally {
      await s.close();
    }
  });

  it('counts a 409 while the first request is in flight and a 422 for another payload', async () => {
    const s = await start();
    try {
      const key = randomUUID();
      const held = gate();
      s.gates.set(key, held);
      const first = s.send(key, { mode: 'ok' }, { gated: true });
      await held.entered;
      const duplicate = await s.send(key, { mode: 'ok' });
      expect(duplicate.status).toBe(409);
      const other = await s.send(key, { mode: 'ok', amount: 2 });
      expect(other.status).toBe(422);
      held.open();
      expect((await first).status).toBe(201);
      expect(s.requests('conflict', '4xx')).toBe(1);
      expect(s.requests('mismatch', '4xx')).toBe(1);
      expect(s.requests('completed', '2xx')).toBe(1);
      expect(s.events.map((e) => [e.outcome, e.status, e.key])).toEqual([
        ['conflict', 409, key],
        ['mismatch', 422, key],
        ['completed', 201, key],
      ]);
      s.expectLowCardinality([key]);
    } finally {
      await s.close();
    }
  });

  it('counts keys released by a 5xx response and by a handler that throws', async () => {
    const s = await start();
    try {
      const unavailable = randomUUID();
      const thrown = randomUUID();
      expect((await s.send(unavailable, { mode: 'unavailable' })).status).toBe(503);
      expect((await s.send(thrown, { mode: 'throw' })).status).toBe(500);
      expect(s.requests('released', '5xx')).toBe(2);
      expect(s.recorder.value(DURATION, { route: ROUTE, method: 'POST', result: 'ok' })).toBe(1);
      expect(s.recorder.value(DURATION, { route: ROUTE, method: 'POST', result: 'error' })).toBe(1);
      expect(s.events.map((e) => [e.outcome, e.status, e.statusClass, e.key])).toEqual([
        ['released', 503, '5xx', unavailable],
        ['released', 500, '5xx', thrown],
      ]);
      // Released: the retry runs again.
      expect((await s.send(unavailable, { mode: 'unavailable' })).status).toBe(503);
      expect(s.requests('released', '5xx')).toBe(3);
      s.expectLowCardinality([unavailable, thrown]);
    } finally {
      await s.close();
    }
  });

  it('counts a lease takeover when a retry finds the first request past its lease', async () => {
    const s = await start();
    try {
      const key = randomUUID();
      const held = gate();
      s.gates.set(key, held);
      const first = s.send(key, { mode: 'ok' }, { gated: true });
      await held.entered;
      // The first request outlives its lease (as a handler slower than leaseMs would).
      await sql
        .raw(
          `UPDATE "${t.schema}".idempotency_key SET locked_until = now() - interval '1 second' WHERE idempotency_key = '${key}'`,
        )
        .execute(t.db);
      expect(s.recorder.value(TAKEOVERS, { route: ROUTE, method: 'POST' })).toBe(0);
      const retry = await s.send(key, { mode: 'ok' });
      expect(retry.status).toBe(201);
      expect(s.recorder.value(TAKEOVERS, { route: ROUTE, method: 'POST' })).toBe(1);
      // The first request's commit is fenced off: its lease is gone, it fails and counts as released.
      held.open();
      expect((await first).status).toBe(500);
      expect(await t.effects(key)).toBe(1);
      expect(s.requests('completed', '2xx')).toBe(1);
      expect(s.requests('released', '5xx')).toBe(1);
      s.expectLowCardinality([key]);
    } finally {
      await s.close();
    }
  });

  it('counts a handler past handlerTimeoutMs as a timeout (503, key released)', async () => {
    const s = await start({ handlerTimeoutMs: 200 });
    try {
      const key = randomUUID();
      const response = await s.send(key, { mode: 'hang' });
      expect(response.status).toBe(503);
      expect(s.requests('timeout', '5xx')).toBe(1);
      expect(s.recorder.value(DURATION, { route: ROUTE, method: 'POST', result: 'timeout' })).toBe(1);
      expect(s.events.map((e) => [e.outcome, e.status, e.key])).toEqual([['timeout', 503, key]]);
      s.expectLowCardinality([key]);
    } finally {
      await s.close();
    }
  });

  it('node:http: counts under its routeTemplate option (default unmatched), and a 400 without a key', async () => {
    const recorder = recordingMeterProvider();
    const events: IdempotencyOutcomeEvent[] = [];
    const keys = idempotencyKeys({
      db: t.db,
      schema: t.schema,
      principal: () => 'alice',
      meterProvider: recorder.provider,
      onOutcome: (event) => void events.push(event),
    });
    const handler = async () => ({ status: 200, body: { ok: true } });
    const named = await listen(idempotentNodeHandler(keys, handler, { routeTemplate: () => '/orders/:id' }));
    const unnamed = await listen(idempotentNodeHandler(keys, handler));
    try {
      const key = randomUUID();
      const post = (url: string, headers: Record<string, string>) =>
        fetch(`${url}/orders/7`, { method: 'POST', headers, body: '{}' });
      expect((await post(named.url, { 'idempotency-key': key })).status).toBe(200);
      expect((await post(named.url, {})).status).toBe(400);
      expect((await post(unnamed.url, { 'idempotency-key': randomUUID() })).status).toBe(200);
      const requests = (route: string, outcome: string, statusClass: string) =>
        recorder.value(REQUESTS, { route, method: 'POST', outcome, status_class: statusClass });
      expect(requests('/orders/:id', 'completed', '2xx')).toBe(1);
      expect(requests('/orders/:id', 'missing', '4xx')).toBe(1);
      expect(requests('unmatched', 'completed', '2xx')).toBe(1);
      expect(events.map((e) => [e.outcome, e.route, e.key])).toEqual([
        ['completed', '/orders/:id', key],
        ['missing', '/orders/:id', undefined],
        ['completed', 'unmatched', events[2]?.key],
      ]);
    } finally {
      await named.close();
      await unnamed.close();
    }
  });

  it('Fastify and a mounted Express router count under the matched pattern, never the path', async () => {
    const recorder = recordingMeterProvider();
    const keys = idempotencyKeys({
      db: t.db,
      schema: t.schema,
      principal: () => 'alice',
      meterProvider: recorder.provider,
    });
    const fastify = Fastify();
    fastify.post(
      '/items/:id',
      idempotentFastifyHandler(keys, async () => ({ status: 201, body: { ok: true } })),
    );
    const fastifyUrl = await fastify.listen({ port: 0, host: '127.0.0.1' });
    const router = express.Router({ mergeParams: true });
    router.post(
      '/refunds/:id',
      express.json(),
      idempotentExpressHandler(keys, async () => ({ status: 201, body: { ok: true } }), {
        routeTemplate: (request) => `/tenants/:tenant${String((request.route as { path: string }).path)}`,
      }),
    );
    const app = express();
    app.use('/tenants/:tenant', router);
    const expressServer = await listen(createServer(app));
    try {
      const post = (url: string) =>
        fetch(url, {
          method: 'POST',
          headers: { 'idempotency-key': randomUUID(), 'content-type': 'application/json' },
          body: '{}',
        });
      expect((await post(`${fastifyUrl}/items/1`)).status).toBe(201);
      expect((await post(`${fastifyUrl}/items/2`)).status).toBe(201);
      expect((await post(`${expressServer.url}/tenants/acme/refunds/9`)).status).toBe(201);
      const completed = (route: string) =>
        recorder.value(REQUESTS, { route, method: 'POST', outcome: 'completed', status_class: '2xx' });
      expect(completed('/items/:id')).toBe(2);
      expect(completed('/tenants/:tenant/refunds/:id')).toBe(1);
    } finally {
      await fastify.close();
      await expressServer.close();
    }
  });

  it('a hook that throws is logged and does not change the response', async () => {
    const s = await start();
    try {
      const key = `hook-throws-${randomUUID()}`;
      const response = await s.send(key, { mode: 'ok' });
      expect(response.status).toBe(201);
      expect(await response.json()).toEqual({ id: '42' });
      const replay = await s.send(key, { mode: 'ok' });
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(s.events.map((e) => e.outcome)).toEqual(['completed', 'replay']);
      expect(s.hookErrors).toHaveLength(2);
      expect(String(s.hookErrors[0])).toContain('the hook failed');
      expect(s.requests('completed', '2xx')).toBe(1);
    } finally {
      await s.close();
    }
  });
});
