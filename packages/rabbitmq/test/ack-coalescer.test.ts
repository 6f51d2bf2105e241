// AckCoalescer against a recording channel: a multiple ack only ever covers deliveries that are settled or
// being acked, never one still in flight.

import { describe, expect, it } from 'vitest';
import { AckCoalescer } from '../src/ack-coalescer.js';
import type { AmqpConfirmChannel, AmqpMessage } from '../src/amqp-types.js';

function setup() {
  const sent: string[] = [];
  const channel = {
    ack: (m: AmqpMessage, allUpTo?: boolean) =>
      void sent.push(`ack ${m.fields.deliveryTag}${allUpTo ? '+' : ''}`),
  } as unknown as AmqpConfirmChannel;
  const acks = new AckCoalescer(channel, () => undefined);
  const messages = new Map<number, AmqpMessage>();
  const deliver = (...tags: number[]) => {
    for (const tag of tags) {
      const m = { fields: { deliveryTag: tag } } as AmqpMessage;
      messages.set(tag, m);
      acks.delivered(m);
    }
  };
  return { sent, acks, deliver, m: (tag: number) => messages.get(tag)! };
}

describe('AckCoalescer', () => {
  it('acks a settled run at the head with one multiple ack, the rest one by one', () => {
    const { sent, acks, deliver, m } = setup();
    deliver(1, 2, 3, 4, 5, 6);
    acks.ack(m(1));
    acks.ack(m(2));
    acks.ack(m(3));
    acks.ack(m(5)); // 4 is still in flight
    acks.flush();
    expect(sent).toEqual(['ack 3+', 'ack 5']);
    acks.ack(m(4));
    acks.flush();
    // 4 ends the run 4..5 (5 already acked alone): a multiple ack up to 4 covers only 4.
    expect(sent.slice(2)).toEqual(['ack 4+']);
    acks.ack(m(6));
    acks.flush();
    expect(sent.slice(3)).toEqual(['ack 6+']);
  });

  it('never covers a delivery in flight, and passes over nacked ones', () => {
    const { sent, acks, deliver, m } = setup();
    deliver(1, 2, 3, 4);
    acks.ack(m(2));
    acks.ack(m(4));
    acks.flush();
    expect(sent).toEqual(['ack 2', 'ack 4']); // 1 is in flight: nothing multiple
    acks.settledAlone(m(1)); // nacked
    acks.ack(m(3));
    acks.flush();
    expect(sent.slice(2)).toEqual(['ack 3+']); // covers 3; 1, 2 and 4 were settled already
  });

  it('sends requested acks by itself at the end of the turn, and nothing after close', async () => {
    const { sent, acks, deliver, m } = setup();
    deliver(1, 2, 3, 4);
    acks.ack(m(1));
    acks.ack(m(2));
    expect(sent).toEqual([]); // 3 and 4 are in flight: wait for the end of the turn
    await new Promise((resolve) => setImmediate(resolve));
    expect(sent).toEqual(['ack 2+']);
    acks.ack(m(3));
    acks.close();
    await new Promise((resolve) => setImmediate(resolve));
    acks.flush();
    expect(sent).toEqual(['ack 2+']);
  });

  it('acks at once when nothing else of the channel is in flight (prefetch 1)', () => {
    const { sent, acks, deliver, m } = setup();
    deliver(1);
    acks.ack(m(1));
    expect(sent).toEqual(['ack 1+']);
    deliver(2, 3);
    acks.settledAlone(m(2)); // nacked
    acks.ack(m(3));
    expect(sent).toEqual(['ack 1+', 'ack 3+']);
  });

  it('keeps working across many deliveries (its list is trimmed)', () => {
    const { sent, acks, deliver, m } = setup();
    for (let tag = 1; tag <= 5_000; tag += 2) {
      deliver(tag, tag + 1);
      acks.ack(m(tag + 1));
      acks.ack(m(tag));
      if (tag % 7 === 0) acks.flush();
    }
    acks.flush();
    expect(sent.at(-1)).toBe('ack 5000+');
  });
});
