// A stand-in IdempotentConsumer for testing the learning broker's mechanics in isolation (before and apart
// from core): an in-memory dedupe map, JSON decoding, fixed retry delay, dead letter after maxAttempts.

import { PermanentError, withAttemptLedger } from '@inboxkit/core';
import type { IdempotentConsumer, InboundMessage, Outcome, OutcomeEvent } from '@inboxkit/core';

export interface FakeConsumerOptions {
  readonly name?: string;
  readonly handler?: (message: {
    id: string;
    payload: unknown;
    attempt: number;
    deliveryCount: number | undefined;
  }) => Promise<void>;
  readonly maxAttempts?: number;
  readonly retryDelayMs?: number;
  readonly onOutcome?: (event: OutcomeEvent) => void;
}

export function fakeConsumer(
  options: FakeConsumerOptions = {},
): IdempotentConsumer & { readonly effects: string[] } {
  const name = options.name ?? 'fake';
  const completed = new Set<string>();
  const attempts = new Map<string, number>();
  const effects: string[] = [];
  const maxAttempts = options.maxAttempts ?? 3;
  const report = (message: InboundMessage, outcome: Outcome): Outcome => {
    options.onOutcome?.({ consumer: name, message, outcome });
    return outcome;
  };
  const handle = async (message: InboundMessage): Promise<Outcome> => {
    const id = message.id;
    if (id === undefined)
      return report(message, {
        status: 'dead-letter',
        messageId: undefined,
        reason: 'missing-id',
        attempts: 0,
      });
    if (completed.has(id))
      return report(message, { status: 'duplicate', messageId: id, reason: 'completed' });
    const attempt = (attempts.get(id) ?? 0) + 1;
    attempts.set(id, attempt);
    try {
      const payload: unknown = JSON.parse(
        typeof message.body === 'string' ? message.body : Buffer.from(message.body ?? '').toString(),
      );
      await (options.handler ?? (async () => undefined))({
        id,
        payload,
        attempt,
        deliveryCount: message.deliveryCount,
      });
      completed.add(id);
      effects.push(id);
      return report(message, { status: 'processed', messageId: id, attempt, durationMs: 0 });
    } catch (e) {
      const error =
        e instanceof Error ? { name: e.name, message: e.message } : { name: 'Error', message: String(e) };
      if (e instanceof PermanentError)
        return report(message, {
          status: 'dead-letter',
          messageId: id,
          reason: 'permanent-error',
          attempts: attempt,
          error,
        });
      if (attempt >= maxAttempts)
        return report(message, {
          status: 'dead-letter',
          messageId: id,
          reason: 'max-attempts',
          attempts: attempt,
          error,
        });
      return report(message, {
        status: 'retry',
        messageId: id,
        attempt,
        delayMs: options.retryDelayMs ?? 10,
        reason: 'handler-error',
        error,
      });
    }
  };
  return withAttemptLedger(
    {
      name,
      effects,
      config: { name } as IdempotentConsumer['config'],
      handle,
      handleBatch: (messages: readonly InboundMessage[]) => Promise.all(messages.map(handle)),
    },
    { recordAttemptsStarted: async () => undefined, crashSuspects: async () => new Map<string, number>() },
  );
}
