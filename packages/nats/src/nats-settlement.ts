// JetStream's four settlement verbs, which core's `settle()` drives: a confirmed ack (or term() once the dead
// letter is confirmed), nak(delay) for a retry, the dead letter published to the DLQ subject with its stream's
// acknowledgement, and nak(hold) to leave a message to the broker.

import { deadLetterForms, deadLetterRecord } from '@inboxkit/core';
import type {
  BrokerSettlement,
  DeadLetterForm,
  DeadLetterOutcome,
  FormAttempt,
  InboundMessage,
  LeaveReason,
  Logger,
} from '@inboxkit/core';
import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

import { publishAcknowledged } from './nats-publisher.js';

/** One delivery while this process holds it. */
export interface Held {
  readonly msg: JsMsg;
  readonly inbound: InboundMessage;
  /** A crash suspect: runs alone. */
  suspect: boolean;
  /** Its dead letter is confirmed: the `ack` verb terminates it. */
  deadLettered: boolean;
}

/** Sends a fire-and-forget settlement; on a closed connection the message comes back after its ack wait. */
export function quietly(send: () => void): void {
  try {
    send();
  } catch {
    // The connection is gone: JetStream redelivers after the ack wait, which is what leaving it means.
  }
}

/** The verbs of `natsConsumer` over one connection. */
export class NatsSettlement implements BrokerSettlement<Held> {
  readonly #js: JetStreamClient;
  readonly #connection: NatsConnection;
  readonly #deadLetterSubject: string;
  readonly #consumerName: string;
  readonly #log: Logger;

  constructor(
    js: JetStreamClient,
    connection: NatsConnection,
    deadLetterSubject: string,
    consumerName: string,
    log: Logger,
  ) {
    this.#js = js;
    this.#connection = connection;
    this.#deadLetterSubject = deadLetterSubject;
    this.#consumerName = consumerName;
    this.#log = log;
  }

  async ack(h: Held): Promise<void> {
    if (h.deadLettered) {
      // Terminated, not acked: JetStream stops redelivering it and emits a MSG_TERMINATED advisory.
      quietly(() => h.msg.term('inboxkit: dead-lettered'));
      await this.#connection.flush().catch(() => {});
      return;
    }
    // Confirmed by the server; when it is not, the message comes back and is a duplicate.
    await h.msg
      .ackAck()
      .catch((error: unknown) =>
        this.#log.warn(
          { err: error, messageId: h.inbound.id },
          'natsConsumer: ack not confirmed; the message may come back as a duplicate',
        ),
      );
  }

  async redeliver(h: Held, delayMs: number): Promise<FormAttempt> {
    quietly(() => h.msg.nak(delayMs));
    return { status: 'sent' };
  }

  leave(h: Held, why: LeaveReason): void {
    quietly(() => h.msg.nak(why.holdMs));
  }

  /** The copy in `form`, published to the DLQ subject with the stream's acknowledgement. */
  async deadLetter(held: Held, form: DeadLetterForm, outcome: DeadLetterOutcome): Promise<FormAttempt> {
    const spec = deadLetterForms(deadLetterRecord(this.#consumerName, held.inbound, outcome)).find(
      (s) => s.form === form,
    )!;
    const original: Record<string, string> = {};
    // JetStream's own headers of the source copy stay behind (a Nats-Msg-Id would make the DLQ stream drop it).
    if (spec.originalHeaders)
      for (const [k, v] of Object.entries(held.inbound.headers)) if (!k.startsWith('nats-')) original[k] = v;
    const { info } = held.msg;
    try {
      await publishAcknowledged(
        this.#js,
        this.#connection,
        {
          subject: this.#deadLetterSubject,
          data: held.msg.data,
          headers: { ...original, ...spec.headers },
          // One DLQ copy per source copy: a redelivery after a crash between the publish and term() is dropped by
          // the DLQ stream's duplicate window; a replayed message is a new source copy, so it gets a new DLQ copy.
          msgID: `dlq:${info.stream}:${info.streamSequence}`,
          label: JSON.stringify(held.inbound.id ?? `${info.stream}:${info.streamSequence}`),
        },
        30_000,
      );
      held.deadLettered = true;
      return { status: 'sent' };
    } catch (error) {
      return {
        status: (error as { code?: unknown }).code === 'MESSAGE_TOO_LARGE' ? 'too-large' : 'failed',
        error,
      };
    }
  }
}
