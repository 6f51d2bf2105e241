// Trace context through a transport, on its real broker: a message that carries the producer's W3C
// `traceparent` is processed in a CONSUMER span that continues that trace, the handler runs in a child span (and
// its own spans under that), the dead-letter copy carries the delivery's context on, and the transport's
// publisher injects the active span's context. Each transport's test calls describeTraceContext with its
// harness and its publisher.
import { context, SpanKind, trace } from '@opentelemetry/api';
import {
  idempotentConsumer,
  PermanentError,
  type IdempotentConsumer,
  type OutgoingMessage,
  type Publisher,
} from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { OutcomeRecorder, uniqueName, type TransportHarness } from '@inboxkit/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { useTestTracing } from './tracing.js';

export interface TraceContextTarget<H extends TransportHarness> {
  /** A fresh harness (source queue or topic and its DLQ) on the real broker. */
  harness: () => Promise<H>;
  /** The transport's publisher, and the destination that reaches the harness's source. */
  publisher: (harness: H) => Promise<{ publisher: Publisher; destination: string; routingKey?: string }>;
}

export function describeTraceContext<H extends TransportHarness>(
  transport: string,
  target: TraceContextTarget<H>,
): void {
  const tracing = useTestTracing();
  const disposers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const dispose of disposers.splice(0).reverse()) await dispose();
  });

  async function started(harness: H, recorder: OutcomeRecorder) {
    const consumer = idempotentConsumer<{ poison?: boolean }, unknown>({
      name: uniqueName('traced'),
      store: new InMemoryInboxStore(),
      hooks: { onOutcome: recorder.hook },
      handler: async (message) => {
        tracing.tracer.startSpan('charge card').end(); // the handler's own span: a child of the handler span
        if (message.payload.poison) throw new PermanentError('poison');
      },
    });
    const running = await harness.startConsumer(consumer as unknown as IdempotentConsumer<unknown, unknown>);
    disposers.push(() => running.stop());
  }

  describe(`trace context (${transport})`, () => {
    it('continues the producer trace through the consumer, the handler and the dead-letter copy', async () => {
      const harness = await target.harness();
      disposers.push(() => harness.dispose());
      const producer = tracing.producerSpan('send orders');
      const [ok, poison] = [uniqueName('ok'), uniqueName('poison')];
      await harness.publish([
        { id: ok, body: JSON.stringify({}), headers: producer.headers },
        { id: poison, body: JSON.stringify({ poison: true }), headers: producer.headers },
      ]);
      const recorder = new OutcomeRecorder();
      await started(harness, recorder);
      await recorder.waitFor(ok, 'processed', { timeoutMs: 30_000 });
      await recorder.waitFor(poison, 'dead-letter', { timeoutMs: 30_000 });
      const [deadLetter] = await harness.readDeadLetters(1, 30_000);

      const consumerSpan = (id: string) => {
        const span = tracing.spans('CONSUMER').find((s) => s.attributes['messaging.message.id'] === id);
        expect(span, `the consumer span of ${id}`).toBeDefined();
        return span!;
      };
      for (const id of [ok, poison]) {
        const span = consumerSpan(id);
        expect(span.spanContext().traceId).toBe(producer.traceId);
        expect(span.parentSpanContext?.spanId).toBe(producer.spanId);
        const handler = tracing
          .spans('INTERNAL')
          .find(
            (s) => s.name.startsWith('handler ') && s.parentSpanContext?.spanId === span.spanContext().spanId,
          );
        expect(handler, `the handler span of ${id}`).toBeDefined();
        const own = tracing.spans().filter((s) => s.name === 'charge card');
        expect(own.some((s) => s.parentSpanContext?.spanId === handler!.spanContext().spanId)).toBe(true);
      }
      expect(consumerSpan(ok).attributes['inboxkit.outcome']).toBe('processed');
      expect(consumerSpan(poison).attributes['inboxkit.outcome']).toBe('dead-letter');
      // The dead letter continues the delivery's trace: its parent is the poison message's consumer span.
      expect(deadLetter?.id).toBe(poison);
      expect(tracing.parseTraceparent(deadLetter?.headers['traceparent'])).toEqual({
        traceId: producer.traceId,
        parentId: consumerSpan(poison).spanContext().spanId,
      });
    });

    it("sends the active span's context with what the publisher publishes", async () => {
      const harness = await target.harness();
      disposers.push(() => harness.dispose());
      const { publisher, destination, routingKey } = await target.publisher(harness);
      disposers.push(() => publisher.close());
      const id = uniqueName('published');
      const sending = tracing.tracer.startSpan('place order', { kind: SpanKind.SERVER });
      const message: OutgoingMessage = {
        destination,
        id,
        body: JSON.stringify({}),
        ...(routingKey ? { routingKey } : {}),
      };
      await context.with(trace.setSpan(context.active(), sending), () => publisher.publish([message]));
      sending.end();
      const recorder = new OutcomeRecorder();
      await started(harness, recorder);
      await recorder.waitFor(id, 'processed', { timeoutMs: 30_000 });

      const span = tracing.spans('CONSUMER').find((s) => s.attributes['messaging.message.id'] === id);
      expect(span?.spanContext().traceId).toBe(sending.spanContext().traceId);
      expect(span?.parentSpanContext?.spanId).toBe(sending.spanContext().spanId);
    });
  });
}
