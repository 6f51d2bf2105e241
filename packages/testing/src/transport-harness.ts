// The contract between the transport conformance suite and a transport package: each transport's test
// gives the suite a factory of harnesses bound to its real broker, and the suite proves the same behaviour
// for all of them.

import type { DeadLetterEntry, IdempotentConsumer, TransportConsumer, TransportFeatures } from '@inboxkit/core';

/**
 * What a transport guarantees; the suite runs the ordering and delay checks only where declared. Declared in
 * core (`@inboxkit/core`'s `TransportFeatures`), where the delivery kit picks its policies from it.
 */
export type { TransportFeatures };

/** One message the suite publishes to the harness's source. */
export interface HarnessMessage {
  /** Written as the `message-id` header / property; omitted to test `missing-id`. */
  readonly id?: string;
  readonly body: string | Uint8Array;
  readonly headers?: Readonly<Record<string, string>>;
  /** Partition key / message group, for ordering checks. */
  readonly key?: string;
}

/** Options the suite passes when it starts a transport consumer. */
export interface HarnessConsumerOptions {
  /** Messages handled at once. Default is the transport's default. */
  readonly concurrency?: number;
  /** How long `stop()` waits for in-flight handlers. */
  readonly closeTimeoutMs?: number;
}

/**
 * A transport bound to a fresh source (unique topic/queue names) on a real broker. Created by the transport
 * package's test, once per conformance test.
 */
export interface TransportHarness {
  /** Starts a transport consumer that feeds `consumer`. The suite calls `stop()` on it. */
  startConsumer(consumer: IdempotentConsumer<unknown, unknown>, options?: HarnessConsumerOptions): Promise<TransportConsumer>;
  /** Publishes to the source with the broker's confirmation. */
  publish(messages: readonly HarnessMessage[]): Promise<void>;
  /**
   * Waits until the DLQ holds at least `count` messages (or `timeoutMs` passes) and returns what it holds,
   * headers included. May consume the DLQ copies.
   */
  readDeadLetters(count: number, timeoutMs: number): Promise<DeadLetterEntry[]>;
  /**
   * Simulates a crash of the consuming process: drops the broker connection(s) of every consumer this harness
   * started without settling anything in flight, so unsettled messages are redelivered.
   */
  crash(): Promise<void>;
  /** Deletes what the harness created and closes its clients. */
  dispose(): Promise<void>;
}

/** Builds a fresh harness per test. */
export type TransportHarnessFactory = () => Promise<TransportHarness>;
