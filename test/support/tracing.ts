// An OpenTelemetry SDK for tests that check trace context (the library itself needs only the API): a global
// tracer provider whose spans land in an in-memory exporter, the W3C trace-context propagator and an
// AsyncLocalStorage context manager. Installed for one test file (beforeAll) and removed after it (afterAll),
// since the API's globals are shared by every file a worker runs.
//
//   const tracing = useTestTracing();
//   const producer = tracing.producerSpan('send orders');   // its traceparent, for the message headers
//   ...; expect(tracing.spans('CONSUMER')[0]?.parentSpanContext?.spanId).toBe(producer.spanId);
import { context, propagation, ROOT_CONTEXT, SpanKind, trace, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll } from 'vitest';

export interface TestTracing {
  readonly tracer: Tracer;
  /** Every ended span, optionally only those of one kind. */
  spans(kind?: keyof typeof SpanKind): ReadableSpan[];
  /** A span as a producer would have it (ended), and the headers that carry its context. */
  producerSpan(name: string): { traceId: string; spanId: string; headers: Record<string, string> };
  /** Parses a `traceparent` header. */
  parseTraceparent(value: string | undefined): { traceId: string; parentId: string } | undefined;
}

export function useTestTracing(): TestTracing {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const contextManager = new AsyncLocalStorageContextManager();
  beforeAll(() => {
    contextManager.enable();
    context.setGlobalContextManager(contextManager);
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    trace.setGlobalTracerProvider(provider);
  });
  afterAll(async () => {
    trace.disable();
    propagation.disable();
    context.disable();
    await provider.shutdown();
  });
  const tracer = provider.getTracer('inboxkit-tests');
  return {
    tracer,
    spans: (kind) =>
      exporter.getFinishedSpans().filter((span) => kind === undefined || span.kind === SpanKind[kind]),
    producerSpan(name) {
      const span = tracer.startSpan(name, { kind: SpanKind.PRODUCER }, ROOT_CONTEXT);
      const headers: Record<string, string> = {};
      propagation.inject(trace.setSpan(ROOT_CONTEXT, span), headers);
      span.end();
      const { traceId, spanId } = span.spanContext();
      return { traceId, spanId, headers };
    },
    parseTraceparent(value) {
      const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(value ?? '');
      return match ? { traceId: match[1]!, parentId: match[2]! } : undefined;
    },
  };
}
