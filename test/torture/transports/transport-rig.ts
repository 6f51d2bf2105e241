// What the harness needs from each broker: create and delete the run's topic or queues, send planned messages
// (confirmed, retried through outages), say how much is still unsettled, read the DLQ, and restart the broker.

import type { ConsumerSettings, TransportName } from '../consumer-settings.js';
import type { PlannedMessage } from '../message-plan.js';

/** A dead letter as the checker sees it. */
export interface DeadLetterCopy {
  readonly id: string | undefined;
  readonly reason: string | undefined;
}

export interface TransportRig {
  readonly name: TransportName;
  /** Messages sent again because their send was not confirmed (each may be one more duplicate). */
  readonly resent: number;
  /** Creates the run's topic / queues. */
  setup(): Promise<void>;
  /** The transport part of consumer `index`'s settings. */
  consumerSettings(index: number): Pick<ConsumerSettings, 'kafka' | 'rabbitmq' | 'sqs' | 'nats'>;
  /** Sends and waits for the broker's confirmation; retries through outages until it succeeds. */
  send(messages: readonly PlannedMessage[]): Promise<void>;
  /** Messages the broker still holds unsettled (lag, queue depth), or undefined when it cannot tell right now. */
  backlog(): Promise<number | undefined>;
  /** Every copy in the DLQ. */
  readDeadLetters(): Promise<DeadLetterCopy[]>;
  /** Restarts the broker (or, where a restart would wipe it, cuts the consumers off it); says what it did. */
  restartBroker(): Promise<string>;
  /** How the table names the broker restart. */
  readonly restartLabel: string;
  /** Deletes the run's topic / queues and closes connections. */
  teardown(): Promise<void>;
}

/** Retries `work` until it succeeds (a broker restart makes sends fail for a while), up to `timeoutMs`. */
export async function retrying<T>(
  what: string,
  work: () => Promise<T>,
  timeoutMs = 180_000,
  onRetry?: (error: unknown) => void,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let delay = 100;
  for (;;) {
    try {
      return await work();
    } catch (error) {
      if (Date.now() > deadline)
        throw new Error(`${what} kept failing for ${timeoutMs} ms: ${(error as Error).message}`, {
          cause: error,
        });
      onRetry?.(error);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 2_000);
    }
  }
}
