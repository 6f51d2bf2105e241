// Crash injection and delivery counting for the real brokers, where the learning transport's own seams are
// not available. It wraps the idempotent consumer a transport drives:
//
// - a crash before COMMIT runs the delivery through @inboxkit/testing's crashable twin: the handler returns,
//   then the transaction rolls back, as when the process dies before COMMIT; the broker gets the message back;
// - a crash after the commit, before the ack, lets the real outcome commit and then hands the broker a retry
//   instead of the ack: the message comes back, as it would after the process died with the ack unsent.
//
// Both are what a broker sees after a real crash (the message is delivered again), without killing a process.

import { crashableConsumer } from '@inboxkit/testing';
import { attemptLedgerOf, withAttemptLedger } from '@inboxkit/core';
import type { IdempotentConsumer, InboundMessage, Outcome, OutcomeStatus } from '@inboxkit/core';

import type { DeliveryCounts, DemoCrashSeam } from './demo-transport.js';
import { COPY_HEADER } from './story.js';
import type { StoryMessage } from './story.js';

interface Waiter {
  readonly done: () => boolean;
  readonly resolve: () => void;
}

export class FaultInjector {
  readonly #armed: { seam: DemoCrashSeam; id: string }[] = [];
  readonly #crashes: Record<DemoCrashSeam, number> = {
    'after-handler-before-commit': 0,
    'after-commit-before-ack': 0,
  };
  readonly #extraCopies = new Set<number>();
  readonly #sentIds = new Set<string>();
  readonly #sentCopies: number[] = [];
  readonly #deliveriesOfCopy = new Map<number, number>();
  readonly #finalOfCopy = new Map<number, OutcomeStatus>();
  readonly #ids = new Set<string>();
  readonly #waiters = new Set<Waiter>();
  #deliveries = 0;
  #duplicateCopies = 0;
  #redeliveries = 0;

  /** Notes what is about to be published, so a second copy of an id can be told from a redelivery. */
  sent(messages: readonly StoryMessage[]): void {
    for (const m of messages) {
      if (this.#sentIds.has(m.id)) this.#extraCopies.add(m.copy);
      this.#sentIds.add(m.id);
      this.#sentCopies.push(m.copy);
    }
  }

  arm(seam: DemoCrashSeam, id: string): void {
    this.#armed.push({ seam, id });
  }

  counts(): DeliveryCounts {
    return {
      deliveries: this.#deliveries,
      distinctIds: this.#ids.size,
      duplicateCopies: this.#duplicateCopies,
      redeliveries: this.#redeliveries,
      crashes: { ...this.#crashes },
    };
  }

  /** Resolves once every copy published so far got a final outcome (processed, duplicate, dead-letter). */
  whenAllFinal(timeoutMs: number): Promise<void> {
    const done = (): boolean => this.#sentCopies.every((copy) => this.#finalOfCopy.has(copy));
    if (done()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(waiter);
        const open = this.#sentCopies.filter((copy) => !this.#finalOfCopy.has(copy));
        reject(
          new Error(`timed out after ${timeoutMs} ms waiting for copies ${open.join(', ')} to be settled`),
        );
      }, timeoutMs);
      const waiter: Waiter = {
        done,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.#waiters.add(waiter);
    });
  }

  /** The consumer to hand to the transport instead of `consumer`. */
  wrap<P, Tx>(consumer: IdempotentConsumer<P, Tx>): IdempotentConsumer<P, Tx> {
    const crashable = crashableConsumer(consumer);
    const wrapped: IdempotentConsumer<P, Tx> = {
      name: consumer.name,
      config: consumer.config,
      handle: async (message) => {
        this.#count(message);
        let outcome: Outcome;
        if (this.#take('after-handler-before-commit', message.id)) {
          const attempt = await crashable.handleCrashingAfterHandler(message);
          // Crashed: the transaction rolled back and core recorded the attempt; its retry (delay 0) gives the
          // message back to the broker at once, as a dead process would after its session timed out.
          if (attempt.crashed) {
            this.#crashes['after-handler-before-commit'] += 1;
            return attempt.outcome;
          }
          this.#armed.unshift({ seam: 'after-handler-before-commit', id: message.id! });
          outcome = attempt.outcome;
        } else {
          outcome = await consumer.handle(message);
        }
        if (outcome.status === 'processed' && this.#take('after-commit-before-ack', message.id)) {
          this.#crashes['after-commit-before-ack'] += 1;
          return {
            status: 'retry',
            messageId: outcome.messageId,
            delayMs: 0,
            attempt: outcome.attempt,
            reason: 'handler-error',
            error: {
              name: 'SimulatedCrash',
              message: 'simulated crash after the commit: the ack was never sent',
            },
          };
        }
        this.#settled(message, outcome);
        return outcome;
      },
      handleBatch: async (messages) => {
        const outcomes: Outcome[] = [];
        for (const message of messages) outcomes.push(await wrapped.handle(message));
        return outcomes;
      },
    };
    // The transport charges crash suspects through the consumer's attempt ledger: forward it.
    return withAttemptLedger(wrapped, attemptLedgerOf(consumer)!);
  }

  #take(seam: DemoCrashSeam, id: string | undefined): boolean {
    const i = this.#armed.findIndex((a) => a.seam === seam && a.id === id);
    if (i < 0) return false;
    this.#armed.splice(i, 1);
    return true;
  }

  #count(message: InboundMessage): void {
    this.#deliveries += 1;
    if (message.id !== undefined) this.#ids.add(message.id);
    const copy = Number(message.headers[COPY_HEADER]);
    if (!Number.isSafeInteger(copy)) return;
    const before = this.#deliveriesOfCopy.get(copy) ?? 0;
    this.#deliveriesOfCopy.set(copy, before + 1);
    if (before > 0) this.#redeliveries += 1;
    else if (this.#extraCopies.has(copy)) this.#duplicateCopies += 1;
  }

  #settled(message: InboundMessage, outcome: Outcome): void {
    if (outcome.status === 'retry') return;
    const copy = Number(message.headers[COPY_HEADER]);
    if (Number.isSafeInteger(copy) && message.replay === undefined)
      this.#finalOfCopy.set(copy, outcome.status);
    for (const waiter of [...this.#waiters]) {
      if (!waiter.done()) continue;
      this.#waiters.delete(waiter);
      waiter.resolve();
    }
  }
}
