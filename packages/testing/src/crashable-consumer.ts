// A twin of an IdempotentConsumer whose handler can "die" after the user's handler returned and before the
// transaction commits. The twin shares the original's name, store and configuration, so to the inbox it is
// the same consumer; only deliveries run through `handleCrashingAfterHandler` can crash, which an
// AsyncLocalStorage probe scopes to exactly one delivery even when many run at once.

import { AsyncLocalStorage } from 'node:async_hooks';

import { idempotentConsumer } from '@inboxkit/core';
import type {
  IdempotentConsumer,
  IdempotentConsumerConfig,
  InboundMessage,
  MessageHandler,
  Outcome,
  OutcomeEvent,
} from '@inboxkit/core';

import { CrashSignal, isCrashSignal } from './crash-signal.js';

interface CrashProbe {
  fired: boolean;
}

const probes = new AsyncLocalStorage<CrashProbe>();

/** The result of a delivery that was meant to crash after its handler. */
export interface CrashAttempt {
  readonly outcome: Outcome;
  /**
   * True when the handler returned and the crash was injected (the transaction rolled back; treat the
   * delivery as lost). False when the handler never returned normally (it threw, or did not run because the
   * delivery was a duplicate or dead-lettered): then `outcome` is real and must be settled as usual.
   */
  readonly crashed: boolean;
}

/** An IdempotentConsumer plus a way to crash one delivery between its handler and its commit. */
export interface CrashableConsumer {
  readonly consumer: IdempotentConsumer<unknown, unknown>;
  /** Handles one delivery with the original consumer. */
  handle(message: InboundMessage): Promise<Outcome>;
  /**
   * Handles one delivery through the twin: after the user's handler returns, a `CrashSignal` is thrown so the
   * handler's transaction rolls back. Core records the failed attempt (like a crash under
   * `recordAttemptsStarted`); the outcome is not reported to `hooks.onOutcome`, as a dead process reports
   * nothing.
   */
  handleCrashingAfterHandler(message: InboundMessage): Promise<CrashAttempt>;
}

/**
 * Wraps `consumer` for crash injection. The twin is built on first use with core's `idempotentConsumer()`
 * from `consumer.config`, so it works with any store.
 *
 * @example
 * const crashable = crashableConsumer(consumer);
 * const { crashed } = await crashable.handleCrashingAfterHandler(message); // effect rolled back
 * await crashable.handle(message); // the redelivery applies it
 */
export function crashableConsumer<P, Tx>(consumer: IdempotentConsumer<P, Tx>): CrashableConsumer {
  let twin: IdempotentConsumer<P, Tx> | undefined;
  const original = consumer as unknown as IdempotentConsumer<unknown, unknown>;
  return {
    consumer: original,
    handle: (message) => consumer.handle(message),
    async handleCrashingAfterHandler(message) {
      twin ??= buildTwin(consumer);
      const probe: CrashProbe = { fired: false };
      const outcome = await probes.run(probe, () => twin!.handle(message));
      return { outcome, crashed: probe.fired };
    },
  };
}

function buildTwin<P, Tx>(consumer: IdempotentConsumer<P, Tx>): IdempotentConsumer<P, Tx> {
  const config = consumer.config;
  const handler: MessageHandler<P, Tx> = async (message, context) => {
    await config.handler(message, context);
    const probe = probes.getStore();
    if (probe) {
      probe.fired = true;
      throw new CrashSignal('after-handler-before-commit');
    }
  };
  const userIsRetriable = config.isRetriable;
  const onOutcome = config.hooks?.onOutcome;
  const twinConfig: IdempotentConsumerConfig<P, Tx> = {
    ...config,
    handler,
    // A user's classifier must not turn the simulated crash into a dead letter.
    ...(userIsRetriable
      ? { isRetriable: (error: unknown) => isCrashSignal(error) || userIsRetriable(error) }
      : {}),
    hooks: {
      ...config.hooks,
      ...(onOutcome
        ? {
            onOutcome: (event: OutcomeEvent) =>
              probes.getStore()?.fired === true ? undefined : onOutcome(event),
          }
        : {}),
    },
  };
  return idempotentConsumer(twinConfig);
}
