// RabbitMQ's settlement verbs, the port core's `settle()` drives. A delivery is settled only on the channel that
// delivered it: when that channel died, the broker has already taken the message back and every verb is a
// no-op that the inbox absorbs on redelivery. Copies (retry, dead letter) are published on the delivering
// confirm channel, and the original is acked only once the broker confirmed the copy.

import { abortableSleep, DEAD_LETTER_FORMS, isInboxkitError, MessageTooLargeError } from '@inboxkit/core';
import type {
  BrokerSettlement,
  DeadLetterForm,
  DeadLetterOutcome,
  FormAttempt,
  InboundMessage,
  LeaveReason,
  RetryOutcome,
} from '@inboxkit/core';
import type { AckCoalescer } from './ack-coalescer.js';
import type { AmqpConfirmChannel, AmqpConnection, AmqpMessage } from './amqp-types.js';
import { confirmPublish } from './confirm-publish.js';
import type { RawPublish } from './confirm-publish.js';
import type { ResolvedConsumerOptions } from './consumer-options.js';
import { deadLetterCopies, retryCopy } from './settlement-copies.js';

/** One channel's life: deliveries are settled on the channel that delivered them, or not at all. */
export interface Session {
  readonly connection: AmqpConnection;
  readonly channel: AmqpConfirmChannel;
  /** The channel's acks, coalesced per turn of the event loop. */
  readonly acks: AckCoalescer;
  consumerTag: string | undefined;
  alive: boolean;
  /** Set once consuming: from then on a close triggers a reconnect. */
  ready: boolean;
}

/** A delivery as the broker handed it. */
export interface Delivery {
  readonly session: Session;
  readonly message: AmqpMessage;
}

/** A delivery with the message core handles. */
export interface Item extends Delivery {
  readonly inbound: InboundMessage;
}

/** A copy amqplib refuses on every attempt (`MessageTooLargeError`, matched by code across duplicate installs). */
function isTooLarge(error: unknown): boolean {
  return isInboxkitError(error) && error.code === 'MESSAGE_TOO_LARGE';
}

const CHANNEL_CLOSED: FormAttempt = {
  status: 'failed',
  error: new Error('the delivering channel closed: the broker redelivers the message'),
};

/** The settlement verbs of one RabbitMQ consumer. */
export class RabbitmqSettlement implements BrokerSettlement<Item> {
  readonly #o: ResolvedConsumerOptions;
  readonly #stop: AbortSignal;

  constructor(options: ResolvedConsumerOptions, stop: AbortSignal) {
    this.#o = options;
    this.#stop = stop;
  }

  ack({ session, message }: Delivery): void {
    if (!session.alive) return; // The broker already took it back; the inbox absorbs the redelivery.
    session.acks.ack(message);
  }

  /**
   * Delay 0: nack with requeue. Otherwise a copy to the delay queue of the smallest bucket holding it at least
   * `delayMs`, carrying the attempts made so far (`x-inboxkit-attempt`), then the ack.
   */
  async redeliver(item: Item, delayMs: number, outcome: RetryOutcome): Promise<FormAttempt> {
    if (delayMs <= 0) {
      this.requeue(item);
      return { status: 'sent' };
    }
    const attempt = await this.#publishThenAck(
      item,
      retryCopy(item.message, item.inbound, outcome, this.#o.topology),
    );
    if (attempt.status !== 'too-large') return attempt;
    const error = new MessageTooLargeError('the delay-queue copy exceeds the 64 KiB AMQP header table');
    return { status: 'too-large', error };
  }

  /** Publishes the dead letter in `form` to `<queue>.dlx` and waits for the confirm; does not ack. */
  async deadLetter(item: Item, form: DeadLetterForm, outcome: DeadLetterOutcome): Promise<FormAttempt> {
    if (!item.session.alive) return CHANNEL_CLOSED;
    const copies = deadLetterCopies(
      this.#o.handler.name,
      item.message,
      item.inbound,
      outcome,
      this.#o.topology,
    );
    return this.#publish(item.session, copies[DEAD_LETTER_FORMS.indexOf(form)]!);
  }

  /** Holds the original for a while (so a broken path does not spin), then nacks it with requeue. */
  async leave(delivery: Delivery, why: LeaveReason): Promise<void> {
    // A dead channel already returned the original.
    if (!delivery.session.alive) return;
    await abortableSleep(why.holdMs, this.#stop);
    this.requeue(delivery);
  }

  /** Nack with requeue, at once. */
  requeue({ session, message }: Delivery): void {
    if (!session.alive) return;
    try {
      session.channel.nack(message, false, true);
      session.acks.settledAlone(message);
    } catch (err) {
      this.#o.logger.debug({ err }, 'rabbitmq consumer: nack on a closing channel dropped');
    }
  }

  async #publishThenAck(item: Item, copy: RawPublish): Promise<FormAttempt> {
    if (!item.session.alive) return CHANNEL_CLOSED;
    const attempt = await this.#publish(item.session, copy);
    if (attempt.status === 'sent') this.ack(item);
    return attempt;
  }

  async #publish(session: Session, copy: RawPublish): Promise<FormAttempt> {
    try {
      await confirmPublish(session.channel, [copy], this.#o.confirmTimeoutMs);
      return { status: 'sent' };
    } catch (error) {
      return { status: isTooLarge(error) ? 'too-large' : 'failed', error };
    }
  }
}
