// Creates (or checks) a source stream and its DLQ stream with the settings inboxkit relies on: file storage (a
// server restart keeps the messages), limits retention, and a duplicate window for `Nats-Msg-Id`.

import { ConfigurationError } from '@inboxkit/core';
import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { isNotFound } from './nats-headers.js';
import type { JetStreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';

/** Options of `ensureStreams`. */
export interface EnsureStreamsOptions {
  readonly connection: NatsConnection;
  /** The source stream and the subjects it captures (`orders.>`). */
  readonly stream: string;
  readonly subjects: readonly string[];
  /** The DLQ stream and its subject (the consumer's `deadLetterSubject`). */
  readonly deadLetterStream: string;
  readonly deadLetterSubject: string;
  /**
   * JetStream's duplicate window for `Nats-Msg-Id` on both streams. Default is JetStream's, 2 minutes. It only
   * drops a re-publish within the window; the inbox keeps ids far longer (its dedupe window), so a duplicate
   * outside it is still applied once.
   */
  readonly duplicateWindowMs?: number;
}

async function ensure(
  jsm: JetStreamManager,
  name: string,
  subjects: readonly string[],
  duplicateWindowMs: number,
): Promise<void> {
  try {
    const info = await jsm.streams.info(name);
    const missing = subjects.filter((s) => !info.config.subjects?.includes(s));
    if (missing.length > 0) {
      throw new ConfigurationError(
        `ensureStreams: stream ${JSON.stringify(name)} exists without the subjects ${missing.join(', ')}: add them, or name another stream`,
      );
    }
    return;
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
  await jsm.streams.add({
    name,
    subjects: [...subjects],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    duplicate_window: nanos(duplicateWindowMs),
  });
}

/**
 * Creates the source stream and the DLQ stream when they do not exist (file storage, limits retention, the
 * duplicate window), and checks that existing ones capture the subjects. Idempotent.
 *
 * @example
 * await ensureStreams({
 *   connection: nc,
 *   stream: 'ORDERS', subjects: ['orders.>'],
 *   deadLetterStream: 'ORDERS_DLQ', deadLetterSubject: 'dlq.orders',
 * });
 */
export async function ensureStreams(options: EnsureStreamsOptions): Promise<void> {
  const duplicateWindowMs = options.duplicateWindowMs ?? 120_000;
  if (!Number.isFinite(duplicateWindowMs) || duplicateWindowMs <= 0) {
    throw new ConfigurationError(
      `ensureStreams: \`duplicateWindowMs\` must be a positive number, got ${duplicateWindowMs}`,
    );
  }
  if (options.subjects.length === 0)
    throw new ConfigurationError('ensureStreams: `subjects` must name at least one subject');
  const jsm = await jetstreamManager(options.connection);
  await ensure(jsm, options.stream, options.subjects, duplicateWindowMs);
  await ensure(jsm, options.deadLetterStream, [options.deadLetterSubject], duplicateWindowMs);
}
