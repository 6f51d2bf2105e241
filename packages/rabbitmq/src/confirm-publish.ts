// "Publish and be sure" on a confirm channel: resolves only when the broker acked the message AND routed it
// to at least one queue. Messages are published `mandatory`, because RabbitMQ acks an unroutable message
// (no queue bound) after dropping it; the basic.return that precedes that ack turns it into a failure.

import { HEADERS, MessageTooLargeError, PublishError } from '@inboxkit/core';
import type { AmqpConfirmChannel, AmqpMessage, AmqpPublishOptions } from './amqp-types.js';

/** Counts returned (unroutable) messages per (exchange, routing key, message id) on one channel. */
class ReturnTracker {
  readonly #returned = new Map<string, number>();

  static key(exchange: string, routingKey: string, messageId: unknown): string {
    return `${exchange}\u0000${routingKey}\u0000${typeof messageId === 'string' ? messageId : ''}`;
  }

  onReturn = (message: AmqpMessage): void => {
    const key = ReturnTracker.key(
      message.fields.exchange,
      message.fields.routingKey,
      message.properties.messageId,
    );
    this.#returned.set(key, (this.#returned.get(key) ?? 0) + 1);
  };

  /** True (once per return) when a message with this key was returned. */
  take(key: string): boolean {
    const n = this.#returned.get(key) ?? 0;
    if (n === 0) return false;
    if (n === 1) this.#returned.delete(key);
    else this.#returned.set(key, n - 1);
    return true;
  }
}

const trackers = new WeakMap<AmqpConfirmChannel, ReturnTracker>();

function trackerOf(channel: AmqpConfirmChannel): ReturnTracker {
  let tracker = trackers.get(channel);
  if (!tracker) {
    tracker = new ReturnTracker();
    channel.on('return', tracker.onReturn);
    trackers.set(channel, tracker);
  }
  return tracker;
}

/** One message for `confirmPublish`. */
export interface RawPublish {
  readonly exchange: string;
  readonly routingKey: string;
  readonly content: Buffer;
  readonly options: AmqpPublishOptions;
}

function describe(p: RawPublish): string {
  return `exchange "${p.exchange}" with routing key "${p.routingKey}"`;
}

/**
 * amqplib encodes a message's headers into a 64 KiB buffer and throws a RangeError past it, before anything
 * reaches the broker (and before the confirm is registered, so the channel stays usable). The same copy is
 * refused on every attempt: a non-retriable `MessageTooLargeError`, never an outage.
 */
function tooLarge(m: RawPublish, err: RangeError): MessageTooLargeError {
  const id = m.options.messageId ?? m.options.headers?.[HEADERS.messageId];
  return new MessageTooLargeError(`publish to ${describe(m)} cannot be encoded: ${err.message}`, {
    cause: err,
    ...(typeof id === 'string' ? { messageId: id } : {}),
  });
}

/**
 * Publishes `messages` (persistent, mandatory) and resolves once the broker confirmed every one. Rejects with
 * a `PublishError` on a nack, an unroutable message, a closed channel or after `timeoutMs` without confirm, and
 * with a `MessageTooLargeError` (not retriable) for a message amqplib cannot encode (headers over 64 KiB).
 */
export async function confirmPublish(
  channel: AmqpConfirmChannel,
  messages: readonly RawPublish[],
  timeoutMs: number,
): Promise<void> {
  const tracker = trackerOf(channel);
  const confirms: Promise<void>[] = [];
  for (const m of messages) {
    const key = ReturnTracker.key(m.exchange, m.routingKey, m.options.messageId);
    let writable = true;
    const confirm = new Promise<void>((resolve, reject) => {
      try {
        writable = channel.publish(
          m.exchange,
          m.routingKey,
          m.content,
          { ...m.options, persistent: true, mandatory: true },
          (err) => {
            if (err)
              reject(
                new PublishError(`RabbitMQ did not confirm the publish to ${describe(m)}`, { cause: err }),
              );
            else if (tracker.take(key))
              reject(new PublishError(`unroutable: no queue is bound to ${describe(m)}`));
            else resolve();
          },
        );
      } catch (err) {
        reject(
          err instanceof RangeError
            ? tooLarge(m, err)
            : new PublishError(`publish to ${describe(m)} failed: ${(err as Error).message}`, { cause: err }),
        );
      }
    });
    // Handled here so a rejection while waiting for 'drain' is not reported as unhandled; Promise.all sees it.
    confirm.catch(() => undefined);
    confirms.push(confirm);
    if (!writable) await drained(channel, timeoutMs);
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new PublishError(`RabbitMQ did not confirm ${messages.length} publish(es) within ${timeoutMs} ms`),
        ),
      timeoutMs,
    );
    timer.unref();
  });
  try {
    await Promise.race([Promise.all(confirms), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Waits for the channel's write buffer to drain (or its close, or the timeout). */
async function drained(channel: AmqpConfirmChannel, timeoutMs: number): Promise<void> {
  await new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      channel.removeListener('drain', done);
      channel.removeListener('close', done);
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    timer.unref();
    channel.on('drain', done);
    channel.on('close', done);
  });
}
