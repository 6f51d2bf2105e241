// hooks.onOutcome, metrics through @opentelemetry/api, the pino-compatible logger, and the handler's context.

import { describe, expect, it } from 'vitest';
import { METRIC_NAMES } from '../src/consumer-metrics.js';
import type { HandlerContext, Logger, OutcomeEvent } from '../src/consumer-types.js';
import { downstreamKey } from '../src/downstream-key.js';
import { HandlerTimeoutError, PermanentError } from '../src/errors.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import { InMemoryInboxStore, type InMemoryTransaction } from '../src/memory/index.js';
import type { InboundMessage } from '../src/message.js';
import { recordingMeterProvider } from '../../../test/support/recording-meter-provider.js';

const message = (id: string, extra: Partial<InboundMessage> = {}): InboundMessage => ({
  id,
  body: JSON.stringify({ id }),
  headers: {},
  source: { transport: 'memory' },
  ...extra,
});

function recordingLogger(): Logger & { lines: { level: string; msg: string | undefined; obj: object }[] } {
  const lines: { level: string; msg: string | undefined; obj: object }[] = [];
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, msg, obj });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

describe('observability', () => {
  it('reports every outcome once through onOutcome, and survives a throwing hook', async () => {
    const events: OutcomeEvent[] = [];
    const logger = recordingLogger();
    const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
      name: 'hooks',
      store: new InMemoryInboxStore(),
      logger,
      handler: async () => {},
      hooks: {
        onOutcome: async (event) => {
          events.push(event);
          if (event.message.id === 'boom') throw new Error('hook failed');
        },
      },
    });
    await consumer.handle(message('m1'));
    await consumer.handle(message('m1'));
    await consumer.handleBatch([message('m2'), message('m3')]);
    expect(await consumer.handle(message('boom'))).toMatchObject({ status: 'processed' });
    expect(events.map((e) => `${e.consumer}:${e.message.id}:${e.outcome.status}`)).toEqual([
      'hooks:m1:processed',
      'hooks:m1:duplicate',
      'hooks:m2:processed',
      'hooks:m3:processed',
      'hooks:boom:processed',
    ]);
    expect(logger.lines.some((l) => l.level === 'warn' && l.msg?.includes('onOutcome threw'))).toBe(true);
  });

  it('counts outcomes, duplicates, retries, dead letters, late messages, mismatches, lease takeovers and handler time', async () => {
    const metrics = recordingMeterProvider();
    let now = Date.now();
    const store = new InMemoryInboxStore({ clock: () => now });
    const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
      name: 'metrics',
      store,
      meterProvider: metrics.provider,
      maxAttempts: 2,
      dedupeWindowMs: 60_000,
      backoff: { initialDelayMs: 0, maxDelayMs: 0 },
      handler: async (m) => {
        if (m.id === 'fail') throw new Error('no');
        if (m.id === 'perm') throw new PermanentError('never');
      },
    });
    const c = { consumer: 'metrics' };
    await consumer.handle(message('ok'));
    await consumer.handle(message('ok'));
    await consumer.handle(message('fail'));
    await consumer.handle(message('fail'));
    await consumer.handle(message('perm'));
    await consumer.handle({ ...message('ok'), body: '{"other":true}' });
    await consumer.handle(message('late', { timestamp: new Date(now - 120_000) }));
    expect(metrics.value(METRIC_NAMES.messages, { ...c, outcome: 'processed' })).toBe(1);
    expect(metrics.value(METRIC_NAMES.messages, { ...c, outcome: 'duplicate' })).toBe(1);
    expect(metrics.value(METRIC_NAMES.messages, { ...c, outcome: 'retry' })).toBe(1);
    expect(metrics.value(METRIC_NAMES.messages, { ...c, outcome: 'dead-letter' })).toBe(4);
    expect(metrics.value(METRIC_NAMES.duplicates, { ...c, reason: 'completed' })).toBe(1);
    expect(metrics.value(METRIC_NAMES.retries, { ...c, reason: 'handler-error' })).toBe(1);
    expect(metrics.value(METRIC_NAMES.deadLetters, { ...c, reason: 'max-attempts' })).toBe(1);
    expect(metrics.value(METRIC_NAMES.deadLetters, { ...c, reason: 'permanent-error' })).toBe(1);
    expect(metrics.value(METRIC_NAMES.deadLetters, { ...c, reason: 'payload-mismatch' })).toBe(1);
    expect(metrics.value(METRIC_NAMES.deadLetters, { ...c, reason: 'beyond-dedupe-window' })).toBe(1);
    expect(metrics.value(METRIC_NAMES.payloadMismatches, c)).toBe(1);
    expect(metrics.value(METRIC_NAMES.lateMessages, { ...c, policy: 'dead-letter' })).toBe(1);
    expect(metrics.value(METRIC_NAMES.handlerDuration, { ...c, result: 'ok' })).toBe(1);
    expect(metrics.value(METRIC_NAMES.handlerDuration, { ...c, result: 'error' })).toBe(3);

    const leased = idempotentConsumer<unknown, InMemoryTransaction>({
      name: 'metrics-leased',
      store,
      meterProvider: metrics.provider,
      mode: 'leased',
      leaseMs: 1_000,
      handlerTimeoutMs: 500,
      handler: async () => {},
    });
    await store.claimLease(
      { consumer: 'metrics-leased', maxAttempts: 5, dedupeWindowMs: 60_000, lockTimeoutMs: 100, leaseMs: 1_000 },
      { messageId: 'm1', fingerprint: (await import('../src/fingerprint.js')).fingerprintPayload({ id: 'm1' }), messageTimestamp: undefined, deliveryCount: 0, replayId: undefined },
    );
    expect(await leased.handle(message('m1'))).toMatchObject({ status: 'retry', reason: 'lease-held' });
    now += 1_001;
    expect(await leased.handle(message('m1'))).toMatchObject({ status: 'processed', attempt: 2 });
    expect(metrics.value(METRIC_NAMES.leaseTakeovers, { consumer: 'metrics-leased' })).toBe(1);
  });

  it('gives the handler its attempt, consumer, replay flag, logger and a stable downstream key', async () => {
    const contexts: HandlerContext<InMemoryTransaction>[] = [];
    const logger = recordingLogger();
    const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
      name: 'context',
      store: new InMemoryInboxStore(),
      logger,
      backoff: { initialDelayMs: 0, maxDelayMs: 0 },
      handler: async (_m, context) => {
        contexts.push(context);
        if (contexts.length === 1) throw new Error('first fails');
      },
    });
    await consumer.handle(message('m1'));
    await consumer.handle(message('m1', { replay: { replayId: 'r' } }));
    expect(contexts.map((c) => [c.attempt, c.consumer, c.isReplay, c.downstreamKey])).toEqual([
      [1, 'context', false, downstreamKey('context', 'm1')],
      [2, 'context', true, downstreamKey('context', 'm1')],
    ]);
    expect(contexts[0]!.logger).toBe(logger);
    expect(contexts[0]!.signal.aborted).toBe(false);
  });

  it('aborts the signal at the handler timeout and retries the attempt as a timeout', async () => {
    const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
      name: 'timeout',
      store: new InMemoryInboxStore(),
      handlerTimeoutMs: 30,
      handler: async (_m, { signal }) => {
        await new Promise((resolve, reject) => {
          const timer = setTimeout(resolve, 5_000);
          signal.addEventListener('abort', () => {
            clearTimeout(timer);
            reject(signal.reason);
          });
        });
      },
    });
    const outcome = await consumer.handle(message('m1'));
    expect(outcome).toMatchObject({ status: 'retry', reason: 'handler-error', error: { name: 'HandlerTimeoutError' } });
    expect(new HandlerTimeoutError('x').retriable).toBe(true);
  });

  it('logs nothing by default', async () => {
    const consumer = idempotentConsumer({ name: 'quiet', store: new InMemoryInboxStore(), handler: async () => {} });
    await expect(consumer.handle(message('m1'))).resolves.toMatchObject({ status: 'processed' });
  });
});
