// W3C trace context over HTTP, on real Postgres: a request that carries the caller's `traceparent` is served in a
// SERVER span continuing that trace (the handler's own spans are its children), and idempotentFetch sends the
// active span's context, on every retry, unless the caller set a `traceparent` of its own.

import type { IncomingMessage } from 'node:http';
import { context, SpanKind, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestTracing } from '../../../test/support/tracing.js';
import { idempotentFetch } from '../src/client/index.js';
import { idempotencyKeys } from '../src/index.js';
import { idempotentNodeHandler } from '../src/node/index.js';
import { openHttpTestDatabase, type HttpTestDB, type HttpTestDatabase } from './support/http-test-database.js';
import { listen } from './support/listen.js';

const tracing = useTestTracing();
let t: HttpTestDatabase;
let server: { url: string; close(): Promise<void> };
/** The `traceparent` each attempt arrived with, by idempotency key. */
const received = new Map<string, (string | undefined)[]>();

beforeAll(async () => {
  t = await openHttpTestDatabase('http_trace');
  const keys = idempotencyKeys<HttpTestDB, IncomingMessage>({ db: t.db, schema: t.schema, principal: () => 'alice' });
  server = await listen(
    idempotentNodeHandler(keys, async (request, _body, ctx) => {
      const key = ctx.key ?? 'none';
      const seen = received.get(key) ?? [];
      const traceparent = request.headers.traceparent;
      seen.push(typeof traceparent === 'string' ? traceparent : undefined);
      received.set(key, seen);
      tracing.tracer.startSpan('charge card').end(); // the handler's own span: a child of the request's span
      // The first attempt of a key ending in "-flaky" fails with a 503, so the client retries.
      if (key.endsWith('-flaky') && seen.length === 1) return { status: 503, body: { error: 'try again' } };
      return ctx.transaction(async (tx) => {
        await tx.insertInto('effects').values({ label: key }).execute();
        return { status: 201, body: { ok: true } };
      });
    }),
  );
});

afterAll(async () => {
  await server?.close();
  await t?.close();
});

const post = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ amount: 3 }) };

describe('trace context over HTTP', () => {
  it("serves a request in a span that continues the caller's traceparent; the handler's spans are its children", async () => {
    const caller = tracing.producerSpan('checkout');
    const response = await fetch(`${server.url}/payments`, {
      ...post,
      headers: { ...post.headers, 'idempotency-key': 'trace-server', ...caller.headers },
    });
    expect(response.status).toBe(201);

    const span = tracing.spans('SERVER').find((s) => s.name === 'POST /payments');
    expect(span, 'the request span').toBeDefined();
    expect(span!.spanContext().traceId).toBe(caller.traceId);
    expect(span!.parentSpanContext?.spanId).toBe(caller.spanId);
    expect(span!.attributes['http.route']).toBe('/payments');
    const own = tracing.spans().find((s) => s.name === 'charge card' && s.spanContext().traceId === caller.traceId);
    expect(own?.parentSpanContext?.spanId).toBe(span!.spanContext().spanId);
  });

  it("idempotentFetch sends the active span's context on every attempt", async () => {
    const active = tracing.tracer.startSpan('place order', { kind: SpanKind.INTERNAL });
    const response = await context.with(trace.setSpan(context.active(), active), () =>
      idempotentFetch(`${server.url}/payments`, post, { key: 'trace-client-flaky', baseDelayMs: 1 }),
    );
    active.end();
    expect(response.status).toBe(201);
    const sent = received.get('trace-client-flaky') ?? [];
    expect(sent).toHaveLength(2);
    for (const value of sent) {
      expect(tracing.parseTraceparent(value)).toEqual({
        traceId: active.spanContext().traceId,
        parentId: active.spanContext().spanId,
      });
    }
  });

  it('idempotentFetch keeps a traceparent the caller set', async () => {
    const own = tracing.producerSpan('upstream');
    const active = tracing.tracer.startSpan('place order');
    await context.with(trace.setSpan(context.active(), active), () =>
      idempotentFetch(`${server.url}/payments`, { ...post, headers: { ...post.headers, ...own.headers } }, { key: 'trace-own' }),
    );
    active.end();
    expect(received.get('trace-own')).toEqual([own.headers['traceparent']]);
  });
});
