// Acks of one channel, coalesced: acks requested in the same turn of the event loop go out as one
// `basic.ack multiple` for the longest run of settled deliveries at the head of the channel, and one plain ack
// for each of the others. A multiple ack covers only deliveries that are already settled or being acked now,
// never one still in flight, so "ack only after durable" holds for every message; what it saves is a frame,
// a socket write and, on a quorum queue, a settle command in the queue's log per message.

import type { AmqpConfirmChannel, AmqpMessage } from './amqp-types.js';

export class AckCoalescer {
  readonly #channel: AmqpConfirmChannel;
  readonly #onError: (err: unknown) => void;
  /** Delivery tags of this channel in delivery order (they only grow), from `#head` on: not yet passed. */
  readonly #delivered: number[] = [];
  #head = 0;
  /** Deliveries whose ack is requested and not yet sent, by tag. */
  readonly #ready = new Map<number, AmqpMessage>();
  /** Deliveries already settled on their own (a nack, or an ack sent alone): the broker holds them no more. */
  readonly #settled = new Set<number>();
  #scheduled = false;
  #closed = false;

  constructor(channel: AmqpConfirmChannel, onError: (err: unknown) => void) {
    this.#channel = channel;
    this.#onError = onError;
  }

  /** Every delivery of the channel passes here first, in the order the broker sent them. */
  delivered(message: AmqpMessage): void {
    this.#delivered.push(message.fields.deliveryTag);
  }

  /**
   * Acks `message`: at once when no other delivery of the channel is in flight (nothing to wait for, as at
   * prefetch 1), else at the end of this turn of the event loop, together with the acks requested meanwhile.
   */
  ack(message: AmqpMessage): void {
    if (this.#closed) return;
    this.#ready.set(message.fields.deliveryTag, message);
    const inFlight = this.#delivered.length - this.#head - this.#settled.size - this.#ready.size;
    if (inFlight <= 0) {
      this.flush();
      return;
    }
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        this.flush();
      });
    }
  }

  /** Records that `message` was settled by other means (a nack) so the head can move past it. */
  settledAlone(message: AmqpMessage): void {
    this.#settled.add(message.fields.deliveryTag);
  }

  /** Sends the acks requested so far. */
  flush(): void {
    if (this.#closed || this.#ready.size === 0) return;
    // The longest run at the head whose deliveries are settled or acked now: one multiple ack ends it.
    let last: AmqpMessage | undefined;
    while (this.#head < this.#delivered.length) {
      const tag = this.#delivered[this.#head]!;
      const ready = this.#ready.get(tag);
      if (ready !== undefined) {
        this.#ready.delete(tag);
        last = ready;
      } else if (!this.#settled.delete(tag)) break;
      this.#head += 1;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#delivered.length) {
      this.#delivered.splice(0, this.#head);
      this.#head = 0;
    }
    try {
      if (last !== undefined) this.#channel.ack(last, true);
      // Behind a delivery still in flight: each alone, now (holding them would hold the broker's credit).
      for (const [tag, message] of this.#ready) {
        this.#channel.ack(message, false);
        this.#settled.add(tag);
      }
    } catch (err) {
      this.#onError(err);
    }
    this.#ready.clear();
  }

  /** The channel is gone: its unsettled deliveries went back to the queue; nothing more is sent. */
  close(): void {
    this.#closed = true;
    this.#ready.clear();
    this.#settled.clear();
    this.#delivered.length = 0;
    this.#head = 0;
  }
}
