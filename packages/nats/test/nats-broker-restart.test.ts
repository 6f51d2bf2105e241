// Chaos: nats-server restarted (services.sh restart nats) under a running consumer. JetStream's file store keeps
// the stream and the durable consumer; the client reconnects and the consumer goes on: every message published
// before, during and after the restart is applied exactly once, none is lost and none dead-lettered. Runs in
// the `chaos` project (vitest.config.ts), one file at a time, after every other project.

import { idempotentConsumer } from '@inboxkit/core';
import type { TransportConsumer } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, expect, it } from 'vitest';

import { restartService } from '../../../test/support/services.js';
import { natsPublisher } from '../src/index.js';
import { natsHarness } from './nats-harness.js';
import type { NatsHarness } from './nats-harness.js';

let h: NatsHarness | undefined;
let transport: TransportConsumer | undefined;
afterAll(async () => {
  await transport?.stop();
  await h?.dispose();
});

async function until(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 120_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const holds = async () => {
    try {
      return await condition();
    } catch {
      return false; // the server is restarting
    }
  };
  while (!(await holds())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

it(
  'keeps consuming across a nats-server restart: every message applied once, none lost, none dead-lettered',
  { timeout: 300_000 },
  async () => {
    h = await natsHarness();
    const harness = h;
    const applied = new Map<string, number>();
    const consumer = idempotentConsumer<unknown, unknown>({
      name: 'nats-restart',
      store: new InMemoryInboxStore(),
      handler: async (message) => {
        applied.set(message.id, (applied.get(message.id) ?? 0) + 1);
      },
    });
    transport = await harness.startConsumer(consumer);
    const publisher = natsPublisher({ connection: harness.connection, ackTimeoutMs: 5_000 });
    const send = async (from: number, to: number) => {
      for (let n = from; n < to; n++) {
        const message = {
          destination: `${harness.subjectPrefix}.all`,
          id: `r-${n}`,
          body: JSON.stringify({ n }),
        };
        // Through the outage: a publish without an acknowledgement is sent again (msgID dedupes a stored one).
        for (;;) {
          try {
            await publisher.publish([message]);
            break;
          } catch {
            await new Promise((r) => setTimeout(r, 200));
          }
        }
      }
    };
    await send(0, 200);
    await until('some applied', () => applied.size >= 50);
    const stored = (await (await jetstreamManager(harness.connection)).streams.info(harness.stream)).state
      .messages;
    const sending = send(200, 400);
    await restartService('nats', { timeoutMs: 240_000 });
    await sending;
    // The harness's connection may still be reconnecting when the restart script returns (a request then times
    // out, as in a CI rehearsal): ask again until the server answers.
    let after = -1;
    await until('the stream answers after the restart', async () => {
      after = (await (await jetstreamManager(harness.connection)).streams.info(harness.stream)).state.messages;
      return true;
    });
    expect(after, 'the file store kept the stream across the restart').toBeGreaterThanOrEqual(stored);
    await until('all 400 applied', () => applied.size === 400);
    expect(
      [...applied].filter(([, n]) => n !== 1),
      'applied more than once',
    ).toEqual([]);
    expect(await harness.readDeadLetters(1, 3_000), 'dead letters').toEqual([]);
  },
);
