// start() while the broker cannot be reached: the consumer keeps trying (a proxy on a port of its own stands in
// for a broker that is down, then comes up), becomes ready once it can connect and applies every message once;
// wrong credentials reject at once with a ConfigurationError; stop() ends a start that is still retrying.

import { ConfigurationError, idempotentConsumer } from '@inboxkit/core';
import { uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';
import type { Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declareTopology, rabbitmqConsumer, StartTimeoutError } from '../src/index.js';
import type { DeclaredTopology } from '../src/index.js';
import { startFailure } from '../src/start-retry.js';
import { amqpUrl } from './amqp-service.js';
import { useSharedBroker } from './broker-lock.js';
import { insertEffect, postgresFixture } from './postgres-fixture.js';
import type { EffectsDatabase, PostgresFixture } from './postgres-fixture.js';
import { TEST_TOPOLOGY } from './rabbitmq-harness.js';
import { tcpProxy } from '../../../test/support/tcp-proxy.js';
import type { TcpProxy } from '../../../test/support/tcp-proxy.js';
import { recordingLogger } from '../../../test/support/recording-logger.js';

useSharedBroker();

/** The broker URL with another port (the proxy's) and, optionally, other credentials. */
function urlVia(port: number, password?: string): string {
  const url = new URL(amqpUrl());
  url.hostname = '127.0.0.1';
  url.port = String(port);
  if (password !== undefined) url.password = password;
  return url.toString();
}

describe('start() while the broker is down', () => {
  let pg: PostgresFixture;
  let topology: DeclaredTopology;
  let proxy: TcpProxy;

  beforeAll(async () => {
    pg = await postgresFixture('start');
    const connection = await amqp.connect(amqpUrl());
    topology = await declareTopology(await connection.createChannel(), {
      ...TEST_TOPOLOGY,
      queue: uniqueName('start'),
    });
    await connection.close();
    const broker = new URL(amqpUrl());
    proxy = await tcpProxy({ host: broker.hostname, port: Number(broker.port || 5672) });
  });

  afterAll(async () => {
    await proxy.close();
    const connection = await amqp.connect(amqpUrl());
    const ch = await connection.createChannel();
    for (const q of [
      topology.queue,
      topology.deadLetterQueue,
      ...topology.delayBucketsMs.map((b) => topology.delayQueue(b)),
    ])
      await ch.deleteQueue(q);
    await ch.deleteExchange(topology.deadLetterExchange);
    await connection.close();
    await pg.dispose();
  });

  it('keeps trying, becomes ready once the broker is reachable, and applies every message once', async () => {
    const name = uniqueName('start');
    const { logger, warnings } = recordingLogger();
    const consumer = idempotentConsumer<unknown, Transaction<EffectsDatabase>>({
      name,
      store: pg.store,
      handler: insertEffect(pg.schema, name),
    });
    const ids = Array.from({ length: 50 }, (_, n) => `m-${n}`);
    const publisher = await amqp.connect(amqpUrl());
    const channel = await publisher.createConfirmChannel();
    for (const id of ids)
      channel.sendToQueue(topology.queue, Buffer.from('{}'), { messageId: id, persistent: true });
    await channel.waitForConfirms();

    const transport = rabbitmqConsumer({
      connect: () => amqp.connect(urlVia(proxy.port)),
      queue: topology.queue,
      handler: consumer,
      concurrency: 4,
      topology: TEST_TOPOLOGY,
      reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
      logger,
    });
    let ready = false;
    const started = transport.start().then(() => {
      ready = true;
    });
    // Several refused attempts, each logged at warn with the next delay; not ready meanwhile.
    await expect.poll(() => warnings.length, { timeout: 20_000 }).toBeGreaterThanOrEqual(3);
    expect(ready).toBe(false);
    expect(warnings[0]!.msg).toMatch(/cannot connect at start; retrying/);
    expect(warnings[0]!.obj).toMatchObject({ attempt: 1, err: { code: 'ECONNREFUSED' } });
    expect((warnings[0]!.obj as { retryInMs: number }).retryInMs).toBeGreaterThan(0);

    await proxy.open();
    await started;
    // Messages published after it became ready are applied too.
    const later = Array.from({ length: 20 }, (_, n) => `later-${n}`);
    for (const id of later)
      channel.sendToQueue(topology.queue, Buffer.from('{}'), { messageId: id, persistent: true });
    await channel.waitForConfirms();
    await publisher.close();

    const all = [...ids, ...later];
    await expect.poll(async () => (await pg.effectCounts()).size, { timeout: 30_000 }).toBe(all.length);
    await transport.stop();
    const counts = await pg.effectCounts();
    expect([...counts].filter(([, n]) => n !== 1)).toEqual([]);
    expect(all.filter((id) => !counts.has(id))).toEqual([]);
  });

  it('rejects at once with a ConfigurationError when the broker refuses the login', async () => {
    const { logger, warnings } = recordingLogger();
    const transport = rabbitmqConsumer({
      connect: () => amqp.connect(urlVia(Number(new URL(amqpUrl()).port || 5672), 'not-the-password')),
      queue: topology.queue,
      handler: idempotentConsumer({
        name: uniqueName('creds'),
        store: pg.store,
        handler: async () => undefined,
      }),
      topology: TEST_TOPOLOGY,
      logger,
    });
    const error = await transport.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(/refused the login.*user name and password/);
    expect(warnings).toEqual([]); // not retried
    await transport.stop();
  });

  it('rejects with a ConfigurationError when the queue exists with other arguments', async () => {
    const transport = rabbitmqConsumer({
      connect: () => amqp.connect(amqpUrl()),
      queue: topology.queue,
      handler: idempotentConsumer({
        name: uniqueName('args'),
        store: pg.store,
        handler: async () => undefined,
      }),
      topology: { ...TEST_TOPOLOGY, deliveryLimit: 33 },
      startTimeoutMs: 60_000,
    });
    await expect(transport.start()).rejects.toThrow(ConfigurationError);
  });

  it('stop() ends a start that is still retrying; start() then resolves without starting', async () => {
    const closed = await tcpProxy({ host: '127.0.0.1', port: 1 });
    const { logger, warnings } = recordingLogger();
    let connects = 0;
    const transport = rabbitmqConsumer({
      connect: () => {
        connects++;
        return amqp.connect(urlVia(closed.port));
      },
      queue: topology.queue,
      handler: idempotentConsumer({
        name: uniqueName('stop'),
        store: pg.store,
        handler: async () => undefined,
      }),
      topology: TEST_TOPOLOGY,
      reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000 },
      logger,
    });
    const started = transport.start();
    await expect.poll(() => warnings.length, { timeout: 10_000 }).toBe(1);
    // The start now sleeps for at least 30 s; stop() ends it.
    await transport.stop();
    await expect(started).resolves.toBeUndefined();
    expect(connects).toBe(1);
  });

  it('rejects with a StartTimeoutError once startTimeoutMs has passed', async () => {
    const closed = await tcpProxy({ host: '127.0.0.1', port: 1 });
    const transport = rabbitmqConsumer({
      connect: () => amqp.connect(urlVia(closed.port)),
      queue: topology.queue,
      handler: idempotentConsumer({
        name: uniqueName('timeout'),
        store: pg.store,
        handler: async () => undefined,
      }),
      topology: TEST_TOPOLOGY,
      reconnect: { initialDelayMs: 20, maxDelayMs: 50 },
      startTimeoutMs: 300,
    });
    const error = await transport.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StartTimeoutError);
    expect(error).toMatchObject({ code: 'START_TIMEOUT' });
    expect((error as StartTimeoutError).attempts).toBeGreaterThanOrEqual(1);
    expect((error as Error).message).toMatch(/startTimeoutMs \(300 ms.*ECONNREFUSED/);
  });
});

describe('startFailure', () => {
  it('retries what a later attempt can get past, rejects what it cannot', () => {
    const coded = (code: string) => Object.assign(new Error(`connect ${code}`), { code });
    for (const transient of [
      coded('ECONNREFUSED'),
      coded('ECONNRESET'),
      coded('ETIMEDOUT'),
      new AggregateError([coded('ECONNREFUSED')], 'connect'),
      new Error('Socket closed abruptly during opening handshake'),
      Object.assign(
        new Error(
          'Connection closed: 320 (CONNECTION-FORCED) with message "broker forced connection closure"',
        ),
        { code: 320 },
      ),
      new Error('Expected ConnectionOpenOk; got <ConnectionClose channel:0>'),
      Object.assign(new Error(`NOT_FOUND - queue 'q' in vhost '/' process is stopped by supervisor`), {
        code: 404,
      }),
    ])
      expect(startFailure(transient, 'q'), String(transient)).toBeUndefined();
    for (const permanent of [
      new Error(
        'Handshake terminated by server: 403 (ACCESS-REFUSED) with message "ACCESS_REFUSED - Login was refused"',
      ),
      Object.assign(new Error('PRECONDITION_FAILED - inequivalent arg'), { code: 406 }),
      Object.assign(new Error('ACCESS_REFUSED - access to queue'), { code: 403 }),
      Object.assign(new Error(`NOT_FOUND - no exchange 'orders-in' in vhost '/'`), { code: 404 }),
      new Error('Expected amqp: or amqps: as the protocol; got '),
      Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }),
      new TypeError('Invalid URL'),
      new ConfigurationError('nope'),
    ])
      expect(startFailure(permanent, 'q'), String(permanent)).toBeInstanceOf(ConfigurationError);
  });
});
