// Trace context through a message's life, with the OpenTelemetry API only (no SDK required: everything here is a
// no-op until the application registers one, with the propagator it chose — W3C `traceparent`/`tracestate` by
// default). A delivery's consumer span continues the producer's trace from the message headers; the handler runs
// in a child span, so its own spans and an outbox row it enqueues join the trace; the dead-letter copy and every
// message a publisher sends carry the context on, in their headers.
//
// Core calls startDeliverySpan/endDeliverySpan around handle() and withHandlerSpan around the handler. Transports
// call injectTraceHeaders once per publisher (the active context) and once per dead-letter copy (the delivery's
// context, deliveryContext(message)). A relay that publishes stored messages (the outbox) calls withSendSpans; the
// HTTP middleware runs a request in withIncomingSpan.

import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type ProxyTracerProvider,
  type Span,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import type { InboundMessage } from './message.js';
import type { Outcome } from './outcome.js';
import type { OutgoingMessage } from './transport.js';

const TRACER_NAME = '@inboxkit/core';

/** Semantic-convention names of the messaging systems inboxkit's transports speak. */
const MESSAGING_SYSTEM: Readonly<Record<string, string>> = {
  kafka: 'kafka',
  rabbitmq: 'rabbitmq',
  sqs: 'aws_sqs',
};

// The context each delivery's consumer span runs in, for the handler span and the dead-letter copy. Weak: it
// lives as long as the transport holds the message.
const deliveryContexts = new WeakMap<InboundMessage, Context>();

/**
 * True when nothing would record or carry a delivery's trace: the consumer was given no tracer provider, none is
 * registered globally (the API's proxy has no delegate) and no propagator is (it reads no header). A delivery's
 * spans would then be non-recording, its context the active one: handle() skips them, which saves their
 * per-delivery allocations (docs/benchmarks.md, "CPU per message"). Checked per delivery, so an SDK registered
 * later is seen at once.
 */
export function tracingIsIdle(provider: TracerProvider | undefined): boolean {
  if (provider !== undefined) return false;
  const global = trace.getTracerProvider() as Partial<ProxyTracerProvider>;
  return (
    typeof global.getDelegateTracer === 'function' &&
    global.getDelegateTracer(TRACER_NAME) === undefined &&
    propagation.fields().length === 0
  );
}

/** The tracer of a consumer: its own provider, or the global one (no-op until an SDK registers). */
export function inboxkitTracer(provider?: TracerProvider): Tracer {
  return (provider ?? trace).getTracer(TRACER_NAME);
}

/** The context the message's headers carry (W3C `traceparent`/`tracestate` with the default propagator). */
export function extractTraceContext(
  headers: Readonly<Record<string, string>>,
  parent: Context = ROOT_CONTEXT,
): Context {
  return propagation.extract(parent, headers);
}

/**
 * Headers with the trace context added (`traceparent`, `tracestate`), from `from` (default: the active
 * context). Without a span in that context (no SDK, or nothing traced) the headers come back as they were, so
 * a copy keeps the context it already carried.
 */
export function injectTraceHeaders(
  headers: Readonly<Record<string, string>> | undefined,
  from: Context = context.active(),
): Record<string, string> {
  const carrier: Record<string, string> = { ...headers };
  if (trace.getSpan(from) !== undefined) propagation.inject(from, carrier);
  return carrier;
}

/**
 * Starts the CONSUMER span of one delivery, a child of the producer's span when the message carries its context
 * (else of the active context). Its context is then the message's deliveryContext().
 */
export function startDeliverySpan(tracer: Tracer, consumer: string, message: InboundMessage): Span {
  const carried = propagation.extract(context.active(), message.headers);
  const destination = message.source.destination;
  const span = tracer.startSpan(
    `process ${destination ?? consumer}`,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        'messaging.system': MESSAGING_SYSTEM[message.source.transport] ?? message.source.transport,
        'messaging.operation.type': 'process',
        'messaging.consumer.group.name': consumer,
        ...(destination !== undefined ? { 'messaging.destination.name': destination } : {}),
        ...(message.id !== undefined ? { 'messaging.message.id': message.id } : {}),
        ...(message.source.partition !== undefined
          ? { 'messaging.destination.partition.id': String(message.source.partition) }
          : {}),
      },
    },
    carried,
  );
  deliveryContexts.set(message, trace.setSpan(carried, span));
  return span;
}

/** Ends a delivery's span with its outcome; retry and dead-letter mark it as an error with their reason. */
export function endDeliverySpan(span: Span, outcome: Outcome): void {
  span.setAttribute('inboxkit.outcome', outcome.status);
  if (outcome.status === 'dead-letter' || outcome.status === 'retry') {
    span.setAttribute('inboxkit.reason', outcome.reason);
    span.setStatus({ code: SpanStatusCode.ERROR, message: `${outcome.status}: ${outcome.reason}` });
  }
  span.end();
}

/**
 * The context of a delivery: its consumer span's while one was started, else the context its headers carry.
 * A dead-letter copy injects this one, so the DLQ message continues the delivery's trace.
 */
export function deliveryContext(message: InboundMessage): Context {
  return deliveryContexts.get(message) ?? extractTraceContext(message.headers, context.active());
}

/** Runs the handler in an INTERNAL span, a child of the delivery's span; a thrown error is recorded on it. */
export async function withHandlerSpan<T>(
  tracer: Tracer,
  consumer: string,
  message: InboundMessage,
  attempt: number,
  run: () => Promise<T>,
): Promise<T> {
  const span = tracer.startSpan(
    `handler ${consumer}`,
    { kind: SpanKind.INTERNAL, attributes: { 'inboxkit.consumer': consumer, 'inboxkit.attempt': attempt } },
    deliveryContext(message),
  );
  try {
    return await context.with(trace.setSpan(deliveryContext(message), span), run);
  } catch (error) {
    span.recordException(error instanceof Error ? error : String(error));
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: error instanceof Error ? error.message : String(error),
    });
    throw error;
  } finally {
    span.end();
  }
}

/**
 * Publishes stored messages, each under a PRODUCER span that continues the trace its own headers carry (an
 * outbox row keeps the context it was enqueued in) and whose context replaces it in the headers sent. The spans
 * end when `publish` settles; a rejection marks them as errors and is rethrown.
 */
export async function withSendSpans<M extends OutgoingMessage>(
  tracer: Tracer,
  messages: readonly M[],
  publish: (messages: M[]) => Promise<void>,
): Promise<void> {
  const spans: Span[] = [];
  const traced = messages.map((message) => {
    const parent = extractTraceContext(message.headers ?? {}, context.active());
    const span = tracer.startSpan(
      `send ${message.destination}`,
      {
        kind: SpanKind.PRODUCER,
        attributes: {
          'messaging.operation.type': 'send',
          'messaging.destination.name': message.destination,
          'messaging.message.id': message.id,
        },
      },
      parent,
    );
    spans.push(span);
    return { ...message, headers: injectTraceHeaders(message.headers, trace.setSpan(parent, span)) };
  });
  try {
    await publish(traced);
  } catch (error) {
    for (const span of spans) {
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: error instanceof Error ? error.message : String(error),
      });
    }
    throw error;
  } finally {
    for (const span of spans) span.end();
  }
}

/**
 * Runs `run` in a span for an incoming request: a child of the active span when one exists (the HTTP server's
 * own instrumentation), else a SERVER span continuing the trace the request headers carry (`traceparent`).
 * A thrown error is recorded on the span and rethrown.
 */
export async function withIncomingSpan<T>(
  tracer: Tracer,
  name: string,
  headers: Readonly<Record<string, string | readonly string[] | undefined>>,
  attributes: Readonly<Record<string, string | number>>,
  run: () => Promise<T>,
): Promise<T> {
  const active = context.active();
  const instrumented = trace.getSpan(active) !== undefined;
  const parent = instrumented ? active : propagation.extract(active, headers);
  const span = tracer.startSpan(
    name,
    { kind: instrumented ? SpanKind.INTERNAL : SpanKind.SERVER, attributes },
    parent,
  );
  try {
    return await context.with(trace.setSpan(parent, span), run);
  } catch (error) {
    span.recordException(error instanceof Error ? error : String(error));
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: error instanceof Error ? error.message : String(error),
    });
    throw error;
  } finally {
    span.end();
  }
}
