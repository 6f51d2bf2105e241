// handle() skips a delivery's spans and context when nothing records or carries a trace (tracingIsIdle): no
// tracer provider given or registered, no propagator. These tests hold the line both ways: nothing started when
// idle, everything as before as soon as an SDK or a propagator is registered, even after the consumer was made.
import { context, propagation, ProxyTracer, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CBaggagePropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import { InMemoryInboxStore, type InMemoryTransaction } from '../src/memory/index.js';
import type { InboundMessage } from '../src/message.js';

const message = (id: string, headers: Record<string, string> = {}): InboundMessage => ({
  id,
  body: '{"n":1}',
  headers,
  source: { transport: 'test' },
});

afterEach(() => {
  vi.restoreAllMocks();
  trace.disable();
  propagation.disable();
  context.disable();
});

describe('handle() when nothing records a trace', () => {
  it('starts no span', async () => {
    const startSpan = vi.spyOn(ProxyTracer.prototype, 'startSpan');
    const consumer = idempotentConsumer<unknown, InMemoryTransaction>({ name: 'idle', store: new InMemoryInboxStore(), handler: async () => {} });
    expect((await consumer.handle(message('m1'))).status).toBe('processed');
    expect((await consumer.handle(message('m1'))).status).toBe('duplicate');
    expect(startSpan).not.toHaveBeenCalled();
  });

  it('traces the next delivery once an SDK registers, after the consumer was made', async () => {
    const seen: (string | undefined)[] = [];
    const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
      name: 'late-sdk',
      store: new InMemoryInboxStore(),
      handler: async () => void seen.push(trace.getActiveSpan()?.spanContext().traceId),
    });
    await consumer.handle(message('before'));
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const contextManager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(contextManager);
    trace.setGlobalTracerProvider(provider);
    await consumer.handle(message('after'));
    const names = exporter.getFinishedSpans().map((s) => s.name);
    expect(names).toEqual(['handler late-sdk', 'process late-sdk']);
    expect(seen[0]).toBeUndefined();
    expect(seen[1]).toBe(exporter.getFinishedSpans()[0]!.spanContext().traceId);
    await provider.shutdown();
  });

  it('runs the handler in the context the headers carry when only a propagator is registered', async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CBaggagePropagator());
    let tenant: string | undefined;
    const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
      name: 'baggage',
      store: new InMemoryInboxStore(),
      handler: async () => {
        tenant = propagation.getActiveBaggage()?.getEntry('tenant')?.value;
      },
    });
    expect((await consumer.handle(message('b1', { baggage: 'tenant=acme' }))).status).toBe('processed');
    expect(tenant).toBe('acme');
  });
});
