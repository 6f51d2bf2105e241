// Issue 22, item 9: declareTopology() called at start-up while the broker is down or restarting must wait for
// it, as the consumer's start() does, instead of failing at once and taking the process with it. Given a
// `connect` function instead of a channel it keeps trying with the consumer's start-up policy; what retrying
// cannot fix (a queue declared with other arguments, refused credentials) rejects at once. A proxy on a port of
// its own stands in for a broker that is down, then comes up.

import { ConfigurationError } from '@inboxkit/core';
import type { Logger } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declareTopology, StartTimeoutError } from '../src/index.js';
import type { DeclaredTopology } from '../src/index.js';
import { amqpUrl } from './amqp-service.js';
import { useSharedBroker } from './broker-lock.js';
import { tcpProxy } from '../../../test/support/tcp-proxy.js';
import type { TcpProxy } from '../../../test/support/tcp-proxy.js';

useSharedBroker();

function warningLogger(): { logger: Logger; warnings: string[]; firstWarning: Promise<void> } {
  const warnings: string[] = [];
  let warned!: () => void;
  const firstWarning = new Promise<void>((resolve) => (warned = resolve));
  const noop = (): void => undefined;
  return {
    warnings,
    firstWarning,
    logger: {
      debug: noop,
      info: noop,
      error: noop,
      warn: (_obj: unknown, msg?: string) => {
        warnings.push(msg ?? '');
        warned();
      },
    },
  };
}

function urlVia(port: number, password?: string): string {
  const url = new URL(amqpUrl());
  url.hostname = '127.0.0.1';
  url.port = String(port);
  if (password !== undefined) url.password = password;
  return url.toString();
}

const fast = { initialDelayMs: 50, maxDelayMs: 200 };
let proxy: TcpProxy;
let connection: amqp.ChannelModel;
const declared: DeclaredTopology[] = [];

beforeAll(async () => {
  const broker = new URL(amqpUrl());
  proxy = await tcpProxy({ host: broker.hostname, port: Number(broker.port || 5672) });
  connection = await amqp.connect(amqpUrl());
});

afterAll(async () => {
  await proxy?.close();
  const ch = await connection.createChannel();
  for (const t of declared) {
    for (const q of [t.queue, t.deadLetterQueue, ...t.delayBucketsMs.map((b) => t.delayQueue(b))])
      await ch.deleteQueue(q);
    await ch.deleteExchange(t.deadLetterExchange);
  }
  await connection.close();
});

describe('declareTopology while the broker is down', () => {
  it('keeps trying through `connect` until the broker is reachable, then declares and closes its connection', async () => {
    await proxy.close();
    const queue = uniqueName('topo-retry');
    const { logger, warnings, firstWarning } = warningLogger();
    const opened: amqp.ChannelModel[] = [];
    const declaring = declareTopology(
      async () => {
        const c = await amqp.connect(urlVia(proxy.port));
        opened.push(c);
        return c;
      },
      { queue, delayBucketsMs: [1_000] },
      { logger, reconnect: fast },
    ).then(
      (t) => t,
      (error: unknown) => error,
    );
    await Promise.race([firstWarning, declaring]);
    expect(warnings[0], 'a retry is announced while the broker is down').toMatch(/retrying/);
    await proxy.open();
    const topology = await declaring;
    expect(topology).toMatchObject({ queue, deadLetterQueue: `${queue}.dlq` });
    declared.push(topology as DeclaredTopology);
    const ch = await connection.createChannel();
    expect((await ch.checkQueue(queue)).queue).toBe(queue);
    expect((await ch.checkQueue(`${queue}.dlq`)).queue).toBe(`${queue}.dlq`);
    await ch.close();
    // The connection it opened is closed again.
    expect(opened).toHaveLength(1);
    await expect(opened[0]!.createChannel()).rejects.toThrow();
  });

  it('rejects with a StartTimeoutError once startTimeoutMs has passed', async () => {
    await proxy.close();
    const error = await declareTopology(
      () => amqp.connect(urlVia(proxy.port)),
      { queue: uniqueName('topo-timeout') },
      { startTimeoutMs: 500, reconnect: fast },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StartTimeoutError);
  });

  it('rejects at once with a ConfigurationError when a queue exists with other arguments', async () => {
    const queue = uniqueName('topo-clash');
    const ch = await connection.createChannel();
    declared.push(await declareTopology(ch, { queue, queueType: 'classic', delayBucketsMs: [1_000] }));
    await ch.close().catch(() => undefined);
    const { logger, warnings } = warningLogger();
    const error = await declareTopology(
      () => amqp.connect(amqpUrl()),
      { queue, queueType: 'quorum', delayBucketsMs: [1_000] },
      { logger, reconnect: fast },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(/PRECONDITION_FAILED/);
    expect(warnings).toEqual([]);
  });

  it('rejects at once with a ConfigurationError when the login is refused', async () => {
    await proxy.open();
    const { logger, warnings } = warningLogger();
    const error = await declareTopology(
      () => amqp.connect(urlVia(proxy.port, 'wrong-password')),
      { queue: uniqueName('topo-login') },
      { logger, reconnect: fast },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(warnings).toEqual([]);
  });
});
